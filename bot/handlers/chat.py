"""`@gemma-bot <question>`: facts first, the model second.

Before asking, the bot resolves what the question is about (`llm.grounding.resolve`) and fetches the read-only
facts itself (the queued resources, `describe` of the ones named, recent errors with the known failures
they match, vLLM health and metrics, cost), so a model that calls no tool still answers from them. The reply
shows those facts first (a known failure's finding leads), then the model's text labelled with who wrote it
(the primary vLLM, else LLM_FALLBACK_BASE_URL, else "Gemma unavailable: rules only"), a contradiction
warning when the text gives a resource a state the facts deny, and a "based on" line (long facts attached).

The tools are the read-only commands declared with a `ChatTool` on the registry (status, list, describe,
metrics, logs, cost), run through the runner as the asking user, for what was not pre-fetched. The model
never acts: when the question asks for a change, the reply offers the exact command behind a button, and
that command then goes through the usual role check and Confirm step.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from bot.authorship import rules_only, written_by
from bot.commands import ChatTool, Command, Param, UsageError, registry
from bot.context import Context
from bot.diagnosis import deployment_of, resource_diagnosis, serving_now
from bot.render import Attachment, Reply, blocks_reply, context, human_duration, section
from bot.views.findings import diagnosis_text
from bot.views.gemma import VERDICTS
from bot.views.metrics import metrics_lines, ms
from llm.agent import AgentAnswer, Tool, answer, suggest_from_question
from llm.client import ChosenModel
from llm.diagnose import Diagnosis, Finding, diagnose
from llm.grounding import Fact, Subjects, contradictions, estimate_tokens, facts_block, resolve
from llm.logscope import place, present
from llm.logsum import summarize
from llm.redact import redact
from ops import cloudlogs, cost
from ops.errors import BadInput, OpsError
from ops.faults import Deployment
from ops.linear import linear
from ops.tpu_model import QueuedResourceInfo
from ops.zonefit import classify

_WORDS = linear(r"[a-z0-9-]+")


def read_only_tools(ctx: Context, question: str = "") -> Mapping[str, Tool]:
    """The chat tools: the registry's commands declared with a `ChatTool`, each schema built from the
    command's parameters. A call becomes the command line it stands for, parsed and validated like typed
    input, and runs through the runner as the asking user (`Context.run_command`: role checked, errors as
    one-line answers). A `describe` called without a name gets the one queued resource the question names,
    so its result belongs to the resource asked about."""

    def runner(tool: ChatTool, command: Command) -> Callable[..., str]:
        def run(**arguments: Any) -> str:
            if "name" in tool.params and not str(arguments.get("name") or "").strip():
                arguments = {**arguments, "name": _named_resource(ctx, question)}
            try:
                invocation = ctx.registry.parse(command.tool_line(arguments))
            except (UsageError, ValueError) as exc:
                return f"error: {exc}"
            if ctx.run_command is None:
                return f"error: `{command.name}` cannot run here (no runner)"
            return ctx.run_command(replace(invocation, deployment=ctx.deployment)).text

        return run

    return {
        tool.name: Tool(tool.name, tool.description, command.tool_parameters(), runner(tool, command))
        for tool, command in ctx.registry.tools()
    }


def _named_resource(ctx: Context, question: str) -> str:
    """The watched queued resource whose name the question contains (the longest, if several), or ""."""
    try:
        listing = ctx.services.tpu.list_queued_resources(ctx.services.settings.tpu_zones)
    except OpsError:
        return ""
    words = set(_WORDS.findall(question.lower()))
    named = sorted((qr.name for qr in listing.resources if qr.name in words), key=len)
    return named[-1] if named else ""


def suggestion_button(command: str) -> dict[str, Any]:
    """A button that runs the suggested command through the normal role check and confirmation."""
    return {
        "type": "actions",
        "block_id": "suggestion",
        "elements": [
            {
                "type": "button",
                "action_id": "run_suggested",
                "text": {"type": "plain_text", "text": f"Review {command}"[:75]},
                "value": command,
            }
        ],
    }


ATTACH_OVER_CHARS = 600
"""A fact's full text longer than this is attached as a file; shorter ones are shown whole."""
MAX_LOG_ENTRIES = 2000


def _qr_summary(qr: QueuedResourceInfo, now: datetime) -> str:
    """One line: name, state, zone, accelerator type, provisioning model, nodes, the error and what it is."""
    initiator = f" (by {qr.state_initiator})" if qr.state_initiator else ""
    nodes = ", ".join(f"node {n.name} {n.state}" + (f" {n.health}" if n.health else "") for n in qr.nodes)
    line = (
        f"`{qr.name}`: *{qr.state}*{initiator} in zone `{qr.zone}`, {qr.accelerator_type} "
        f"{qr.provisioning_model.lower()}" + (f", {nodes}" if nodes else "")
    )
    left = qr.time_left(now)
    if left is not None:
        line += f", terminates in {human_duration(left)} (time left)"
    elif qr.valid_until is not None:
        line += f", request valid for {human_duration(qr.valid_until - now)} more"
    if qr.error:
        reason = classify(qr.error)
        line += f"; error: {' '.join(qr.error.split())[:300]} ({reason.reason}, {reason.kind})"
    return line


def _states(resources: list[QueuedResourceInfo]) -> dict[str, str]:
    states = {qr.name: qr.state for qr in resources}
    for qr in resources:
        for node in qr.nodes:
            states[node.name] = node.state
    return states


def gather_facts(
    ctx: Context, question: str, history: list[str]
) -> tuple[Subjects, list[Fact], list[Finding], list[tuple[QueuedResourceInfo, Diagnosis]]]:
    """Resolve what the question is about and fetch its read-only facts; a failing source becomes a fact
    saying what failed (never an exception).

    Returns:
        (the subjects, the facts most important first, the known failures the logs match (most severe
        first), the diagnosis of each subject queued resource in a failure state from its own state and
        error as the TPU API reports them).
    """
    settings = ctx.services.settings
    facts: list[Fact] = []
    findings: list[Finding] = []
    states: list[tuple[QueuedResourceInfo, Diagnosis]] = []
    try:
        listing = ctx.services.tpu.list_queued_resources(settings.tpu_zones)
        resources = list(listing.resources)
        missing = "".join(f"; {zone}: {exc.message}" for zone, exc in listing.errors.items())
    except OpsError as exc:
        resources, missing = [], f"; listing failed: {exc.message}"
    subjects = resolve(question, history, {qr.name: qr.node_ids for qr in resources}, settings.tpu_primary)
    by_name = {qr.name: qr for qr in resources}
    tools = read_only_tools(ctx, question)
    now = ctx.services.now()
    for name in subjects.resources:
        qr = by_name[name]
        # The catalogue reads the resource's state and error (stockout, quota, preemption, node gone...).
        diagnosis = resource_diagnosis(qr, deployment_of(ctx.services, qr, resources))
        if diagnosis is not None:
            states.append((qr, diagnosis))
        detail = tools["describe"].func(name=name)
        facts.append(Fact(f"describe {name}", _qr_summary(qr, now), detail, _states([qr])))
    others = [qr for qr in resources if qr.name not in subjects.resources]
    if others or missing or not resources:
        lines = [_qr_summary(qr, now) for qr in others] or ["no other queued resources"]
        facts.append(
            Fact(
                f"queued resources in {', '.join(settings.tpu_zones)}",
                "\n• ".join(lines) + missing,
                "",
                _states(others),
            )
        )
    if "logs" in subjects.topics:
        facts.append(_error_fact(ctx, subjects, by_name, findings, deployment_of(ctx.services)))
    if "serving" in subjects.topics:
        facts.append(_serving_fact(ctx))
    if "cost" in subjects.topics:
        facts.append(_cost_fact(ctx, [by_name[n] for n in subjects.resources] or resources))
    unique = {(f.name, f.conclusion): f for f in findings}
    return subjects, facts, list(unique.values()), states


def _error_fact(
    ctx: Context,
    subjects: Subjects,
    by_name: dict[str, QueuedResourceInfo],
    findings: list[Finding],
    deployment: Deployment,
) -> Fact:
    """ERROR entries of the subjects' nodes in the window: top templates and the known failures they match
    (those that may describe the running container added to `findings`, their fixes written for
    `deployment`; those of an earlier container or another process named as such, `llm.logscope`)."""
    nodes = [n for name in subjects.resources for n in by_name[name].node_ids]
    node = nodes[0] if len(nodes) == 1 else None
    window = human_duration(subjects.window).removesuffix(" 00m")
    source = f"errors in the last {window}" + (f" on {node}" if node else "")
    try:
        query = cloudlogs.build_filter(subjects.window, severity="ERROR", node=node, now=ctx.services.now())
        entries = ctx.services.log_entries(query, MAX_LOG_ENTRIES)
    except OpsError as exc:
        return Fact(source, f"could not read the logs: {exc.message}")
    if not entries:
        return Fact(source, "no ERROR entries")
    summary = summarize(entries)
    exemplars = "\n".join(e for t in summary.templates for e in t.exemplars).replace("\\n", "\n")
    # errors of an earlier container or of another process are named as such, not as the present state
    now = serving_now(ctx.services)
    placed = place(tuple(diagnose(exemplars, deployment)), summary.templates, now)
    findings += placed.current
    past = placed.earlier + placed.other
    current = present(summary.templates, now)
    ranked = current + tuple(t for t in summary.templates if t not in current)
    top = "; ".join(f"{t.count}× `{t.template[:100]}`" for t in ranked[:3])
    known = ", ".join(_counted(f.name for f in placed.current))
    text = f"{summary.error_entries} ERROR entries; top: {top}" + (
        f"; known failures: {known}" if known else ""
    )
    if past:
        text += "; earlier or from another process, not the present state: " + ", ".join(
            _counted(f.name for f in past)
        )
    detail = "\n".join(
        f"{t.count}\t{t.severity}\t{t.last_seen:%F %T}\t{t.template}" for t in summary.templates
    )
    detail += "".join(f"\nnot the present state: {f.name}: {f.conclusion}" for f in past)
    return Fact(source, text, detail)


def _counted(names: Iterable[str]) -> list[str]:
    """Each name once, in first-seen order, with how many distinct findings it had when more than one
    (e.g. "request-too-long (2 variants)")."""
    counts = Counter(names)
    return [name if n == 1 else f"{name} ({n} variants)" for name, n in counts.items()]


def _cost_fact(ctx: Context, resources: list[QueuedResourceInfo]) -> Fact:
    """What the running queued resources among `resources` have cost so far and cost per hour."""
    now = ctx.services.now()
    lines = []
    for qr in resources:
        if qr.state != "ACTIVE":
            lines.append(f"`{qr.name}` is {qr.state}: no running cost")
            continue
        try:
            spend = cost.burn(qr, now)
        except BadInput as exc:
            ceiling = cost.quote_of(qr).ceiling_text
            bound = f"; {ceiling}" if ceiling else ""
            lines.append(f"`{qr.name}`: cost so far unknown: {exc.message}{bound}")
            continue
        lines.append(
            f"`{qr.name}` ({qr.accelerator_type}, {qr.provisioning_model}): ${spend.usd_so_far:,.2f} so far "
            f"over {spend.hours_so_far:.1f} h at ${spend.usd_per_hour:,.2f}/h"
        )
    return Fact("live burn", "; ".join(lines) or "no queued resources", read_only_tools(ctx)["cost"].func())


def _serving_fact(ctx: Context) -> Fact:
    """vLLM health, served models and the metrics summary; a server without /health and /metrics (any
    OpenAI-compatible server that is not vLLM) is said to be so, not reported as an outage."""
    try:
        client, endpoint = ctx.services.vllm()
    except OpsError as exc:
        return Fact("vLLM", f"no endpoint: {exc.message}")
    with client:
        health = client.health()
        if health.state == "not-vllm":
            return Fact(f"model server at {endpoint.url}", f"{health.detail}: {_probe(ctx)}")
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
    return Fact(f"vLLM at {endpoint.url}", "; ".join(parts), detail)


def _probe(ctx: Context) -> str:
    """A one-token completion of the endpoint's model, as a health line."""
    gemma, _ = ctx.services.gemma()
    with gemma:
        try:
            probe = gemma.probe()
        except OpsError as exc:
            return f"the completion failed: {exc.message}"
    return f"`{probe.model}` answered a one-token completion in {ms(probe.latency_s)}"


def _facts_blocks(
    facts: list[Fact], findings: list[Finding], states: list[tuple[QueuedResourceInfo, Diagnosis]]
) -> list[dict[str, Any]]:
    """The facts as the user reads them: each subject resource's failure state and error (the TPU API's,
    under the resource, not among the log's failures), the known failures in the log, then one line per
    fact."""
    blocks: list[dict[str, Any]] = []
    for qr, diagnosis in states:
        heading = f"`{qr.name}` is {qr.state}: its state and error (TPU API)"
        shown = diagnosis_text(diagnosis, heading=heading)
        blocks.append(section(shown if diagnosis.findings else f"*{heading}*\n{shown}"))
    if findings:
        blocks.append(section(diagnosis_text(Diagnosis(tuple(findings), ()))))
    lines = "\n".join(
        f"• {f.summary}" if f.source.startswith(("describe", "queued")) else f"• _{f.source}_: {f.summary}"
        for f in facts
    )
    blocks.append(section("*Facts* (fetched just now)\n" + lines))
    return blocks


def _ask(
    ctx: Context, question: str, history: list[Any], facts: list[Fact], findings: list[Finding]
) -> tuple[AgentAnswer | None, ChosenModel | None, tuple[str, ...], list[str]]:
    """Ask the first model that answers, the facts in its prompt within its context; the next on failure.
    The catalogue's findings go first, so the model adds to them rather than guessing another cause.

    Returns:
        (the answer or None, the model that wrote it, the facts given in full, why models could not answer).
    """
    if findings:
        known = "; ".join(f"{f.name}: {f.conclusion} Fix: {f.fix}" for f in findings)
        facts = [Fact("known failures (the bot's catalogue)", known), *facts]
    failures: list[str] = []
    tools = read_only_tools(ctx, question)
    for chosen in ctx.services.models(failures):
        context_tokens = chosen.context.tokens
        answer_tokens = min(ctx.services.settings.llm_answer_tokens, context_tokens // 4)
        prompt_room = context_tokens - answer_tokens - estimate_tokens(question) - 600
        history_room = sum(estimate_tokens(str(h)) for h in history)
        block, detailed = facts_block(facts, max(prompt_room - history_room, 0) // 2)
        try:
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
        except OpsError as exc:
            failures.append(f"{chosen.role} `{chosen.model}`: {exc.message}")
            continue
        return result, chosen, detailed, failures
    return None, None, (), failures


def feedback_buttons(answer_id: int) -> dict[str, Any]:
    """Helpful / Not helpful buttons; a click runs `/gemma rate ID VERDICT` through the runner."""
    return {
        "type": "actions",
        "block_id": "feedback",
        "elements": [
            {
                "type": "button",
                "action_id": f"rate_{verdict.replace('-', '_')}",
                "text": {"type": "plain_text", "text": verdict.replace("-", " ").capitalize()},
                "value": f"gemma rate {answer_id} {verdict}",
            }
            for verdict in VERDICTS
        ],
    }


@registry.command(
    "gemma chat",
    "Ask about the deployment: the bot fetches the facts, Gemma answers from them (works in threads)",
    Param("question", "the question", required=True, rest=True, metavar="QUESTION"),
)
def gemma_chat(ctx: Context, question: str) -> Reply:
    history = ctx.thread_history() if ctx.thread_history else []
    texts = [str(h.get("content", "")) if isinstance(h, dict) else str(h) for h in history]
    subjects, facts, findings, failed = gather_facts(ctx, question, texts)
    known = [f for _, diagnosis in failed for f in diagnosis.findings] + findings
    result, chosen, detailed, failures = _ask(ctx, question, history, facts, known)
    blocks = _facts_blocks(facts, findings, failed)
    states = {k: v for f in facts for k, v in f.states.items()}
    notes = []
    suggested = suggest_from_question(question)
    if result is not None and chosen is not None:
        wrong = contradictions(result.text, states)
        if wrong:
            blocks.append(
                section(":warning: *The answer below contradicts the facts above*: " + "; ".join(wrong) + ".")
            )
        blocks.append(section(result.text.strip()[:2900] or "(the model wrote nothing)"))
        blocks.append(context(written_by(chosen) + " · " + chosen.context.describe()))
        used = [call.name for call in result.tool_calls_made if call.name != "suggest_command"]
        if used:
            notes.append("looked at: " + ", ".join(dict.fromkeys(used)))
        if not result.used_tools:
            notes.append(
                "answered without tools: the server does not accept tools (start vLLM with "
                "--enable-auto-tool-choice --tool-call-parser gemma4)"
            )
        suggested = result.suggested_command
        given = [f.source for f in facts] + [call.name for call in result.tool_calls_made]
        answer_id = ctx.services.store.save_answer(
            redact(question)[:2000],
            chosen.model,
            given,
            user_id=ctx.user_id,
            channel_id=ctx.channel_id,
            now=ctx.services.now(),
        )
        blocks.append(feedback_buttons(answer_id))
    else:
        blocks.append(section(rules_only(failures, ctx.services.settings)))
    if suggested:
        blocks.append(section(f"To do that: `{suggested}`. I never act by myself:"))
        blocks.append(suggestion_button(suggested))
    files = []
    based = []
    for fact in facts:
        name = fact.source
        if fact.detail and len(fact.detail) > ATTACH_OVER_CHARS:
            filename = "fact-" + "".join(c if c.isalnum() or c in "-." else "-" for c in name)[:60] + ".txt"
            files.append(Attachment(filename, fact.detail, name))
            name += f" (`{filename}`)"
        if chosen is not None and fact.detail and fact.source not in detailed:
            name += " (summary only in the prompt)"
        based.append(name)
    if subjects.resources:
        based.append(f"subject from the {subjects.origin}")
    notes.insert(0, "based on: " + "; ".join(based))
    blocks.append(context(" · ".join(notes)))
    reply = blocks_reply(blocks)
    reply.files.extend(files)
    return reply
