"""`@gemma-bot <question>`: facts first, the model second.

Before asking, the bot resolves what the question is about (`bot.chat.subjects`: names against the queued
resources, nodes and deployments it knows, typos and unknown names said, the thread's subject) and fetches
the read-only facts itself, each with its time: the queued resources, `describe` of the subjects, recent
errors with the known failures they match (placed against the running container: a failure from before is
told as past), the vLLM container, health and metrics, cost, the deployments asked about (as `/fleet`
gathers them), and the commands just run in this conversation and how they ended (the audit trail). A model
that calls no tool still answers from them.

The reply is short: the answer first, then only the facts it rests on (`bot.views.chat`); every fact is in
an attached file, a long answer continues in one, and nothing is cut without saying so.

The tools are the read-only commands declared with a `ChatTool` on the registry, run through the runner as
the asking user. The model never acts: a change is offered (a Review button, then the usual role check and
Confirm) only when the asker's own words ask for it (`bot.chat.asks`); instructions found in logs, tool
results or other people's messages are reported and ignored (`bot.chat.asks.find_instructions`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from bot.chat.asks import (
    DIRECTIVES,
    Found,
    Outcome,
    asks_nothing,
    deletions,
    find_instructions,
    offer,
    offers,
    outcomes,
    patterns,
    planted,
    recent_fact,
)
from bot.chat.subjects import (
    BOT,
    Aim,
    Known,
    Subjects,
    ThreadMessage,
    aim_of,
    plan_call,
    resolve,
    scope_of,
)
from bot.commands.context import Context
from bot.commands.registry import ChatTool, Command, Param, UsageError, registry, resource_name
from bot.services import Services
from bot.shared.diagnosis import (
    deployment_of,
    resource_diagnosis,
    rules_only,
    serving_now,
    written_by,
)
from bot.shared.fleet_status import departed_line, deployment_lines, snapshots
from bot.shared.serving import ContainerNow, container_now, counted_names
from bot.slack.render import Reply, human_duration
from bot.views.chat import Answer, Shown, chat_reply, nothing_asked, resource_line
from bot.views.cost import burn_text, burn_total
from bot.views.findings import unmatched_fact
from bot.views.metrics import metrics_lines, ms
from llm.agent import FACTS_PROMPT, SUGGEST_TOOL, SYSTEM_PROMPT, AgentAnswer, Tool, ToolResult, answer
from llm.claims import Checked, check_answer
from llm.client import ChosenModel, first_answer
from llm.grounding import Evidence, Fact, Scope, estimate_tokens, facts_block
from llm.logsum import summarize
from llm.redact import redact
from ops.cost import pricing as cost
from ops.diagnosis.engine import Diagnosis, Finding, diagnose, place, present, template_of
from ops.diagnosis.families import FixFacts
from ops.diagnosis.nomatch import Template, from_templates
from ops.errors import BadInput, OpsError
from ops.gcp import cloudlogs
from ops.tpu.model import QueuedResourceInfo, absent_nodes

MAX_LOG_ENTRIES = 2000


def read_only_tools(ctx: Context, got: Gathered | None = None) -> Mapping[str, Tool]:
    """The chat tools: the registry's commands declared with a `ChatTool`, each schema built from the
    command's parameters, its subject parameters (those of kind `resource_name`: a queued resource, a node)
    always among them. A call becomes the command lines it stands for (`bot.chat.subjects.plan_call`: what the
    question is about unless the model names another subject), each parsed and validated like typed input
    and run through the runner as the asking user (`Context.run_command`: role checked, errors as one-line
    answers). Each result says what it is about (`ToolResult.about`), to the model in its first line.
    Without `got`: the asking deployment, no subject."""
    aim = got.aim if got is not None else Aim(ctx.deployment)
    scope = got.scope if got is not None else Scope()

    def runner(tool: ChatTool, command: Command) -> Callable[..., ToolResult]:
        subjects = [p.name for p in command.params if p.kind is resource_name]

        def run(**arguments: Any) -> ToolResult:
            known = got.known if got is not None else None
            serving = command.words[0] == "vllm"
            plan = plan_call(
                tool.name,
                subjects,
                arguments,
                known=known,
                scope=scope,
                aim=aim,
                serving=serving,
                reads=tool.reads,
            )
            texts = [
                f"{r.header}\n"
                + _tool_text(ctx, _command(ctx, r.tool) if r.tool else command, r.arguments, r.deployment)
                for r in plan.reads
            ]
            return ToolResult("\n".join(texts), plan.about, plan.logged, tuple(r.what for r in plan.reads))

        return run

    tools: dict[str, Tool] = {}
    for tool, command in ctx.registry.tools():
        subjects = tuple(p.name for p in command.params if p.kind is resource_name)
        unexposed = tuple(name for name in subjects if name not in tool.params)
        exposed = replace(command, chat_tool=replace(tool, params=(*tool.params, *unexposed)))
        asked = scope.label(aim.resources)
        by_default = f" (without {' or '.join(subjects)}: those of {asked}, the question's)" if asked else ""
        description = tool.description + (by_default if subjects else "")
        tools[tool.name] = Tool(tool.name, description, exposed.tool_parameters(), runner(tool, exposed))
    return tools


def _tool_text(ctx: Context, command: Command, arguments: Mapping[str, Any], deployment: str) -> str:
    """The reply text of a chat tool's command line in `deployment`, or the one-line error that stopped it."""
    try:
        invocation = ctx.registry.parse(command.tool_line(dict(arguments)))
    except (UsageError, ValueError) as exc:
        return f"error: {exc}"
    if ctx.run_command is None:
        return f"error: `{command.name}` cannot run here (no runner)"
    return ctx.run_command(replace(invocation, deployment=deployment)).text


def _states(resources: Iterable[QueuedResourceInfo]) -> dict[str, str]:
    listed = list(resources)
    states = {qr.name: qr.state for qr in listed}
    for qr in listed:
        for node in qr.nodes:
            states[node.name] = node.state
    return states


@dataclass
class Gathered:
    """What the bot read for a question.

    Attributes:
        subjects: what the question is about.
        facts: every fact, most important first (the model's prompt and the attached file).
        shown: what the answer rests on, shown under it (`bot.views.chat.Shown`).
        findings: the known failures the logs match that may describe the present, most severe first.
        failed: the diagnosis of each subject queued resource in a failure state (TPU API state and error).
        nodes: the asking deployment's queued resources -> their node ids.
        scanned: (where, text) of data that may carry instructions (logs, other people's messages).
        known: the names the question was resolved against.
        scope: what the question is about and which subject each name stands for.
        aim: where vLLM, its container and the logs were read, and what the tools read by default.
        findings_about: the subjects `findings` describe (the nodes whose logs or container they came from).
    """

    subjects: Subjects
    known: Known
    scope: Scope
    aim: Aim
    facts: list[Fact] = field(default_factory=list)
    shown: Shown = field(default_factory=Shown)
    findings: list[Finding] = field(default_factory=list)
    failed: list[tuple[QueuedResourceInfo, Diagnosis]] = field(default_factory=list)
    nodes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    scanned: list[tuple[str, str]] = field(default_factory=list)
    findings_about: tuple[str, ...] = ()


def _listings(ctx: Context) -> tuple[list[QueuedResourceInfo], str, dict[str, list[QueuedResourceInfo]]]:
    """This deployment's queued resources, what could not be listed ("" if nothing), and, with several
    deployments, every other one's queued resources (listed at once; one that fails lists none)."""
    settings = ctx.services.settings
    others = {n: s for n, s in (ctx.fleet.services if ctx.fleet else {}).items() if n != ctx.deployment}
    with ThreadPoolExecutor(max_workers=1 + len(others), thread_name_prefix="chat-list") as pool:
        mine = pool.submit(ctx.services.tpu.list_queued_resources, settings.tpu_zones)
        theirs = {
            n: pool.submit(s.tpu.list_queued_resources, s.settings.tpu_zones) for n, s in others.items()
        }
        try:
            listing = mine.result()
            resources = list(listing.resources)
            missing = "".join(f"; {zone}: {exc.message}" for zone, exc in listing.errors.items())
        except OpsError as exc:
            resources, missing = [], f"; listing failed: {exc.message}"
        elsewhere: dict[str, list[QueuedResourceInfo]] = {}
        for name, future in theirs.items():
            try:
                elsewhere[name] = list(future.result().resources)
            except OpsError:
                elsewhere[name] = []
    return resources, missing, elsewhere


def _thread(ctx: Context) -> tuple[list[Any], list[ThreadMessage]]:
    """The thread's earlier messages for the model (role, content) and for resolving the subject."""
    history = ctx.thread_history() if ctx.thread_history else []
    messages = [
        ThreadMessage(
            str(h.get("content", "")) if isinstance(h, dict) else str(h),
            BOT
            if isinstance(h, dict) and h.get("role") == "assistant"
            else str(h.get("user") or "")
            if isinstance(h, dict)
            else "",
        )
        for h in history
    ]
    return history, messages


def _services_of(ctx: Context, deployment: str) -> Services:
    """The backends of `deployment` (the asking one's when the fleet does not hold it)."""
    fleet = ctx.fleet.services if ctx.fleet is not None else {}
    return fleet.get(deployment, ctx.services) if deployment != ctx.deployment else ctx.services


def gather_facts(ctx: Context, question: str, thread: list[ThreadMessage]) -> Gathered:
    """Resolve what the question is about and fetch its read-only facts, each saying what it is about; a
    failing source becomes a fact saying what failed (never an exception). vLLM, its container and the
    logs are read where the question points (`bot.chat.subjects.Aim`): a question about staging's vLLM reads
    staging's."""
    settings = ctx.services.settings
    resources, missing, elsewhere = _listings(ctx)
    now = ctx.services.now()
    fleet = ctx.fleet.services if ctx.fleet else {}
    terms = [settings.vllm_model, *(s.settings.vllm_model for s in fleet.values())]
    runs = _runs(ctx)
    known = Known(
        {qr.name: qr.node_ids for qr in resources},
        ctx.deployment,
        settings.tpu_primary,
        {name: {qr.name: qr.node_ids for qr in listed} for name, listed in elsewhere.items()},
        terms,
        deletions(runs or []),  # a name listed again resolves to the new resource first
        absent_nodes([*resources, *(qr for listed in elsewhere.values() for qr in listed)]),
    )
    subjects = resolve(question, thread, known)
    primaries = {name: s.settings.tpu_primary for name, s in fleet.items()}
    primaries[ctx.deployment] = settings.tpu_primary
    aim = aim_of(known, subjects, primaries)
    got = Gathered(
        subjects, known, scope_of(known, subjects), aim, nodes={qr.name: qr.node_ids for qr in resources}
    )
    notes = subjects.notes()
    if notes:
        got.facts.append(Fact("names in the question", "; ".join(notes), at=now))
    fact, got.shown.recent = recent_fact(runs, question, now)
    got.facts += [fact] if fact else []
    by_name = {qr.name: qr for qr in resources}
    for name in subjects.resources:
        qr = by_name[name]
        # The catalogue reads the resource's state and error (stockout, quota, preemption, node gone...).
        diagnosis = resource_diagnosis(qr, deployment_of(ctx.services, qr, resources))
        if diagnosis is not None:
            got.failed.append((qr, diagnosis))
        described = _tool_text(ctx, _command(ctx, "describe"), {"name": name}, ctx.deployment)
        fact = Fact(f"describe {name}", resource_line(qr, now), described, _states([qr]), now, about=(name,))
        got.facts.append(fact)
        got.shown.facts.append(fact)
    for name, deployment in subjects.elsewhere.items():
        qr = next(q for q in elsewhere[deployment] if q.name == name)
        fact = Fact(
            f"{name} (deployment {deployment})", resource_line(qr, now), "", _states([qr]), now, about=(name,)
        )
        got.facts.append(fact)
        got.shown.facts.append(fact)
    _deployment_facts(ctx, subjects.deployments, got)
    others = [qr for qr in resources if qr.name not in subjects.resources]
    lines = [resource_line(qr, now) for qr in others] or ["no other queued resources"]
    listed = Fact(
        f"queued resources in {', '.join(settings.tpu_zones)}",
        "\n• ".join(lines) + missing,
        "",
        _states(others),
        now,
        about=tuple(qr.name for qr in others) or (ctx.deployment,),
    )
    got.facts.append(listed)
    if missing or not resources or (others and "inventory" in subjects.topics):
        got.shown.facts.append(listed)  # what is missing now is said; a listing question sees every one
    target = _services_of(ctx, aim.deployment)
    container = None
    # the endpoint as the state just read has it: an address that still answers after its queued resource
    # was deleted is not the deployment's vLLM, nor is the container there (as /tpu status says)
    departed = _departed(target) if subjects.topics & {"logs", "serving"} else ""
    if subjects.topics & {"logs", "serving"}:
        container = container_now(target, (aim.serving or aim.deployment,), departed)
        got.facts.append(container.fact)
        got.shown.facts.append(container.fact)
        # The stopped container's own log is the present cause, when the question is about the resource it
        # runs on (the primary) or no resource at all; another resource's failure is its own.
        if container.diagnosis is not None and aim.serves_subject:
            got.findings += container.diagnosis.findings
            got.findings_about += container.fact.about
            got.scanned.append(("the container's log", container.fact.detail))
    if "logs" in subjects.topics:
        mine = target is ctx.services  # `resources` are this deployment's
        for part in aim.each():  # each resource's errors are a fact about it alone, its fixes written for it
            concerned = by_name.get(part.resources[0]) if mine and len(part.resources) == 1 else None
            facts = deployment_of(target, concerned, resources if mine else ())
            _error_facts(target, subjects.window, got, facts, container, part)
    if "serving" in subjects.topics:
        serving = _serving_fact(target, aim, departed)
        got.facts.append(serving)
        got.shown.facts.append(serving)
    if "cost" in subjects.topics:
        burn = _cost_fact(ctx, [by_name[n] for n in subjects.resources] or resources)
        got.facts.append(burn)
        got.shown.facts.append(burn)
    # other people's messages are data; the asker's are the question, the bot's were checked when posted
    got.scanned += [("the thread", m.text) for m in thread if m.author not in (ctx.user_id, BOT)]
    return got


def _command(ctx: Context, tool_name: str) -> Command:
    """The command of the chat tool named `tool_name`."""
    return next(command for tool, command in ctx.registry.tools() if tool.name == tool_name)


def _runs(ctx: Context) -> list[Outcome] | None:
    """The commands run in this conversation (thread, else channel), newest first; None when the audit
    trail cannot be read."""
    try:
        return outcomes(ctx.recent_commands()) if ctx.recent_commands is not None else []
    except Exception:  # the audit store failing must not stop the answer
        return None


def _deployment_facts(ctx: Context, names: tuple[str, ...], got: Gathered) -> None:
    """Each deployment asked about, as `/fleet` gathers it (queued resource, vLLM, cost today, alerts)."""
    fleet = ctx.fleet.services if ctx.fleet is not None else {ctx.deployment: ctx.services}
    wanted = {name: fleet[name] for name in names if name in fleet}
    if not wanted:
        return
    now = ctx.services.now()
    for snap in snapshots(wanted, now):
        lines = deployment_lines(snap)
        fact = Fact(
            f"deployment {snap.name} (as /fleet shows it)", "; ".join(lines), at=now, about=(snap.name,)
        )
        got.facts.append(fact)
        got.shown.deployments.append((snap.name, lines))


def _error_facts(
    services: Services,
    span: timedelta,
    got: Gathered,
    deployment: FixFacts,
    container: ContainerNow | None,
    aim: Aim,
) -> None:
    """ERROR entries in the window of the nodes `aim` points at (one queued resource of the question, or
    the deployment of `services`): top templates and the known failures they match, a fact about that
    resource (`bot.chat.subjects.Aim.each`). Each node is read on its own; a subject
    without a node has no entries of its own (said so, never another node's); a question about no queued
    resource reads every node of the deployment, and says so.
    Those that may describe the running container join `got.findings` (their fixes written for
    `deployment`); those of an earlier container, of another process, or logged while no container runs now
    (`container.down`) are an earlier fact with their last time, not the present state
    (`ops.diagnosis.engine.place`), unless the stopped container's own log names the same family (then it is
    the present cause, already among `got.findings`) or it was logged after the container stopped (then it
    is the newest failure on the node, from another process, and goes first)."""
    down = container.down if container is not None else None
    told = {f.name for f in container.diagnosis.findings} if container and container.diagnosis else set()
    window = human_duration(span).removesuffix(" 00m")
    where = f" on {', '.join(aim.nodes)}" if aim.nodes else "" if aim.resources else " on every node"
    source = f"errors in the last {window}{where}"
    now = services.now()
    if aim.resources and not aim.nodes:
        nodeless = "; ".join(a.sentence() for a in aim.unborn) or (
            f"{got.scope.label(aim.resources)} has no TPU node: no log entries of its own"
        )
        fact = Fact(
            source, f"{nodeless}; its own state and error are what can answer", at=now, about=aim.about
        )
        got.facts.append(fact)
        got.shown.facts.append(fact)
        return
    try:
        entries = sorted(
            (
                entry
                for node in aim.nodes or (None,)
                for entry in services.log_entries(
                    cloudlogs.build_filter(
                        span, project=services.settings.gcp_project, severity="ERROR", node=node, now=now
                    ),
                    MAX_LOG_ENTRIES,
                )
            ),
            key=lambda entry: entry.timestamp,
            reverse=True,
        )[:MAX_LOG_ENTRIES]
    except OpsError as exc:
        unread = Fact(source, f"could not read the logs: {exc.message}", at=now, about=aim.about)
        got.facts.append(unread)
        got.shown.facts.append(unread)  # what is missing now is said
        return
    if not entries:
        none = Fact(source, "no ERROR entries", at=now, about=aim.about)
        got.facts.append(none)
        got.shown.facts.append(none)
        return
    summary = summarize(entries)
    exemplars = "\n".join(e for t in summary.templates for e in t.exemplars).replace("\\n", "\n")
    got.scanned.append(("the logs", exemplars))
    serving = serving_now(services)
    findings = tuple(diagnose(exemplars, deployment).findings)
    placed = place(findings, summary.templates, serving)
    current, past = list(placed.current), [*placed.earlier, *placed.other]
    if down is not None:  # nothing runs now: a failure logged is one of before, unless its log says it too
        stopped_at = container.stopped_at if container is not None else None
        after = [f for f in current if _logged_after(f, summary.templates, stopped_at)]
        past = [f for f in past if f.name not in told]
        past += [
            replace(f, conclusion=f"{f.conclusion} (logged while a container ran; now {down})")
            for f in current
            if f.name not in told and f not in after
        ]
        current = [
            replace(f, conclusion=f"{f.conclusion} (logged after {down}: another process on the node)")
            for f in after
        ]
        got.shown.earlier_why = f"nothing serves now: {down}"
        got.findings[:0] = current  # the newest failure first
    else:
        got.findings += current
    if current:
        got.findings_about += aim.about
    templates = present(summary.templates, serving) if down is None else ()
    ranked = templates + tuple(t for t in summary.templates if t not in templates)
    top = "; ".join(f"{t.count}× `{t.template[:100]}`" for t in ranked[:3])
    known = ", ".join(counted_names(f.name for f in current))
    text = f"{summary.error_entries} ERROR entries; top: {top}" + (
        f"; known failures now: {known}" if known else ""
    )
    unmatched = (
        None
        if findings
        else from_templates(ranked, source="cloud-logging", span=span, ended_at=serving.stopped_at)
    )
    if unmatched is not None:  # no family explains them: say so, with the first error and where to look
        text = f"{summary.error_entries} ERROR entries; {unmatched_fact(unmatched)}"
    detail = "\n".join(
        f"{t.count}\t{t.severity}\t{t.last_seen:%F %T}\t{t.template}" for t in summary.templates
    )
    counted = Fact(source, text, detail, at=now, about=aim.about, logged=True)
    got.facts.append(counted)
    got.shown.facts.append(counted)  # a question about errors sees how many and which
    if past:
        last = max((t.last_seen for t in summary.templates), default=None)
        earlier = Fact(
            f"{source}: earlier failures",
            "; ".join(f"{f.name}: {f.conclusion}" for f in past),
            at=last,
            now=False,
            about=aim.about,
            logged=True,
        )
        got.facts.append(earlier)
        last_seen: dict[str, tuple[Finding, datetime | None]] = {}
        for finding in past:  # each family once, at its latest time
            t = template_of(finding, summary.templates)
            seen = t.last_seen if t is not None else None
            kept = last_seen.get(finding.name)
            if kept is None or (seen is not None and (kept[1] is None or seen > kept[1])):
                last_seen[finding.name] = (finding, seen)
        shown = [*got.shown.earlier, *last_seen.values()]
        got.shown.earlier = sorted(shown, key=lambda item: item[1] or now, reverse=True)


def _logged_after(finding: Finding, templates: tuple[Template, ...], moment: datetime | None) -> bool:
    """Whether the template holding a finding's evidence was last seen after `moment` (False without one)."""
    t = template_of(finding, templates)
    return moment is not None and t is not None and t.last_seen > moment


def _cost_fact(ctx: Context, resources: list[QueuedResourceInfo]) -> Fact:
    """What the running queued resources among `resources` have cost so far and cost per hour, with the
    total; a figure from a missing price row says "at most" and which row stands in."""
    now = ctx.services.now()
    lines = []
    spent = rate = 0.0
    bounded = False
    for qr in resources:
        if qr.state != "ACTIVE":
            lines.append(f"`{qr.name}` is {qr.state}: no running cost")
            continue
        try:
            spend = cost.burn(qr, now)
        except BadInput as exc:
            lines.append(f"`{qr.name}`: cost so far unknown: {exc.message}")
            continue
        bound = spend.quote.bound
        spent, rate, bounded = spent + spend.usd_so_far, rate + spend.usd_per_hour, bounded or bool(bound)
        lines.append(
            f"`{qr.name}` ({qr.accelerator_type}, {qr.provisioning_model}): {burn_text(spend)}"
            + (f" ({spend.quote.used}; {spend.quote.source})" if spend.quote.used else "")
        )
    if rate:
        lines.append(f"total {burn_total(spent, rate, bounded)}")
    detail = _tool_text(ctx, _command(ctx, "cost"), {}, ctx.deployment)
    about = tuple(qr.name for qr in resources) or (ctx.deployment,)
    return Fact("live burn", "; ".join(lines) or "no queued resources", detail, at=now, about=about)


def _departed(services: Services) -> str:
    """What became of the vLLM endpoint the deployment of `services` last used, when the state just read no
    longer has it (`bot.shared.fleet_status.departed_line`, as `/tpu status` says it, without its emoji); ""
    while an endpoint is found or none departed. Without a listing at hand, the resolver reads the cached
    endpoint's node again, and one gone sends it to the listing (`ops.vllm.endpoint.EndpointResolver`)."""
    try:
        services.endpoints.resolve()
        return ""
    except OpsError:
        line = departed_line(services)
    return line.split(" ", 1)[1] if line.startswith(":") else line


def _serving_fact(services: Services, aim: Aim, departed: str = "") -> Fact:
    """vLLM health, served models and the metrics summary now, of the deployment of `services`, about the
    queued resource whose node serves it; a server without /health and /metrics (any OpenAI-compatible
    server that is not vLLM) is said to be so, not reported as an outage. Without an endpoint, what became
    of the last one (`departed`, `_departed`) is said too."""
    now = services.now()
    about = (aim.serving or aim.deployment,)
    try:
        client, endpoint = services.vllm()
    except OpsError as exc:
        gone = f"; {departed}" if departed else ""
        return Fact("vLLM", f"no endpoint now: {exc.message}{gone}", at=now, about=about)
    about = (endpoint.resource,) if endpoint.resource else about
    with client:
        health = client.health()
        if health.state == "not-vllm":
            probe = f"{health.detail}: {_probe(services)}"
            return Fact(f"model server at {endpoint.url}", probe, at=now, about=about)
        parts = [
            f"/health {health.state} ({ms(health.latency_s)})"
            + ("" if health.state == "ready" else f": {health.detail}")
        ]
        try:
            models = client.models()
            parts.append(
                "serving " + ", ".join(f"{m.id} (max_model_len {m.max_model_len or '-'})" for m in models)
            )
            metrics = client.metrics()
            detail = "\n".join(metrics_lines(metrics)).replace("*", "")
            parts.append(detail.split("\n")[0])
        except OpsError as exc:
            parts.append(exc.message)
            detail = ""
    return Fact(f"vLLM at {endpoint.url}", "; ".join(parts), detail, at=now, about=about)


def _probe(services: Services) -> str:
    """A one-token completion of the endpoint's model, as a health line."""
    try:
        probe = services.probe()
    except OpsError as exc:
        return f"the completion failed: {exc.message}"
    return f"`{probe.model}` answered a one-token completion in {ms(probe.latency_s)}"


def prompt_facts(got: Gathered) -> list[Fact]:
    """The facts the model is given: the catalogue's known failures first (so the model adds to them rather
    than guessing another cause), then every fact read."""
    known = [f for _, diagnosis in got.failed for f in diagnosis.findings] + got.findings
    if not known:
        return list(got.facts)
    lines = "; ".join(f"{f.name}: {f.conclusion} Fix: {f.fix}" for f in known)
    about = tuple(dict.fromkeys([*(qr.name for qr, _ in got.failed), *got.findings_about]))
    return [Fact("known failures now (the bot's catalogue)", lines, about=about), *got.facts]


def evidence_of(got: Gathered, result: AgentAnswer, question: str) -> list[Evidence]:
    """Everything the model was given, each text with what it is about: what a claim in its answer must
    come from. The facts and tool results, and the question itself, as a general text (the asker's own
    figures, "starting for 45 minutes", may be repeated; a name in it that resolves to nothing stays
    refused through `unknown_names`)."""
    facts = [
        Evidence(f"{f.source}\n{f.summary}\n{f.detail}", frozenset(f.about), f.now, f.logged)
        for f in prompt_facts(got)
    ]
    calls = [
        Evidence(call.result, frozenset(call.about), logged=call.logged)
        for call in result.tool_calls_made
        if call.name != SUGGEST_TOOL
    ]
    return [*facts, *calls, Evidence(question)]


def _ask(
    ctx: Context, question: str, history: list[Any], got: Gathered
) -> tuple[AgentAnswer | None, ChosenModel | None, tuple[str, ...], list[str]]:
    """Ask the first model that answers, the facts in its prompt within its context; the next on failure.
    The catalogue's findings go first, so the model adds to them rather than guessing another cause.

    Returns:
        (the answer or None, the model that wrote it, the facts given in full, why models could not answer).
    """
    facts = prompt_facts(got)
    failures: list[str] = []
    tools = read_only_tools(ctx, got)

    def ask(chosen: ChosenModel) -> tuple[AgentAnswer, tuple[str, ...]]:
        context_tokens = chosen.context.tokens
        answer_tokens = min(ctx.services.settings.llm_answer_tokens, context_tokens // 4)
        prompt_room = context_tokens - answer_tokens - estimate_tokens(question) - 600
        history_room = sum(estimate_tokens(str(h)) for h in history)
        block, detailed = facts_block(facts, max(prompt_room - history_room, 0) // 2, got.scope)
        result = answer(
            question,
            history,
            chosen.client.openai,
            tools,
            model=chosen.model,
            max_tokens=answer_tokens,
            # this server's tokenizer (vLLM /tokenize), else the conservative estimate, decides how
            # much of the thread and of each tool result fits its context
            counter=chosen.counter(),
            facts=block,
            context_tokens=context_tokens,
        )
        return result, detailed

    first = first_answer(ctx.services.models(failures), ask, failures)
    if first is None:
        return None, None, (), failures
    (result, detailed), chosen = first
    return result, chosen, detailed, failures


@registry.command(
    "gemma chat",
    "Ask about the deployment: the bot fetches the facts, Gemma answers from them (works in threads)",
    Param("question", "the question", required=True, rest=True, metavar="QUESTION"),
    asks_model=True,
)
def gemma_chat(ctx: Context, question: str) -> Reply:
    names = [ctx.deployment, ctx.services.settings.tpu_primary, *(ctx.fleet.services if ctx.fleet else ())]
    if asks_nothing(question, names):  # "ok", "thanks": what can be asked, nothing read
        return nothing_asked(ctx.services.settings.tpu_primary)
    history, thread = _thread(ctx)
    got = gather_facts(ctx, question, thread)
    result, chosen, detailed, failures = _ask(ctx, question, history, got)
    data = patterns(ctx.registry)
    scanned = [(where, text, data) for where, text in got.scanned]
    # the bot's own commands name its commands in their fixes: only directives count in their output
    calls = [call for call in (result.tool_calls_made if result else ()) if call.name != SUGGEST_TOOL]
    scanned += [("a tool result", call.result, DIRECTIVES) for call in calls]
    found: list[Found] = find_instructions(scanned)
    proposed = result.suggested_command if result else None
    offered, refused = offer(
        question, got.subjects, got.nodes, ctx.registry, asker=ctx.user_id, proposed=proposed
    )
    fixes = [f.fix for _, diagnosis in got.failed for f in diagnosis.findings] + [f.fix for f in got.findings]
    bot_offers = offers(ctx.registry, [*fixes, f"/{offered.command}" if offered and offered.command else ""])
    states = {k: v for f in got.facts for k, v in f.states.items()}
    written = None
    if result is not None and chosen is not None:
        notes = []
        # what the tools read, in words ("the status of deployment `production`"), never their names
        used = [
            read
            for call in result.tool_calls_made
            if call.name != SUGGEST_TOOL
            for read in call.read or (f"`{call.name}` (failed)",)
        ]
        if not result.used_tools:
            notes.append(
                "answered without tools: the server does not accept tools (start vLLM with "
                "--enable-auto-tool-choice --tool-call-parser gemma4)"
            )
        given = [f.source for f in got.facts] + [call.name for call in result.tool_calls_made]
        answer_id = ctx.services.store.save_answer(
            redact(question)[:2000],
            chosen.model,
            given,
            user_id=ctx.user_id,
            channel_id=ctx.channel_id,
            now=ctx.services.now(),
        )
        checked = (
            check_answer(
                result.text,
                evidence_of(got, result, question),
                parses=ctx.registry.starts_with_command,
                prompt=SYSTEM_PROMPT + "\n" + FACTS_PROMPT,
                states=states,
                unknown_names=[*got.subjects.read_as, *(u.word for u in got.subjects.unresolved)],
                cut=result.cut,
                only_earlier_failures=bool(got.shown.earlier) and not got.findings,
                scope=got.scope,
                offered=bot_offers,
            )
            if result.model_wrote
            else Checked(result.text)  # the bot's own explanation of an empty answer: nothing to check
        )
        tools_line = (
            "read: " + "; ".join(dict.fromkeys(used))
            if used
            else "used no tools: answered from the facts the bot gave it"
            if result.used_tools
            else "could not use tools"
        )
        found += planted(
            ctx.registry, checked.unoffered, [*got.scanned, *(("a tool result", c.result) for c in calls)]
        )
        written = Answer(
            text=checked.text,
            byline=" · ".join([written_by(chosen), tools_line, chosen.context.describe()]),
            checked=checked,
            notes=tuple(notes),
            answer_id=answer_id,
        )
    return chat_reply(
        got.subjects,
        got.facts,
        got.shown,
        got.findings,
        got.failed,
        written,
        rules_only(failures, ctx.services.settings) if written is None else "",
        offered,
        refused,
        found,
        detailed if chosen is not None else None,
        got.scope,
    )
