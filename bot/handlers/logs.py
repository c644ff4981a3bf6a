"""`/logs` (Cloud Logging entries of the TPU VMs) and `/logs analyze` (error templates and known failure
signatures, which need no model, then the analysis of the first model that answers)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from bot.authorship import rules_only, written_by
from bot.commands import ChatTool, Param, int_range, one_of, registry, resource_name, window
from bot.context import Context
from bot.diagnosis import analysis_diagnosis, deployment_of, serving_now
from bot.render import Attachment, Reply, blocks_reply, code, context, header, section, split_sections, utc
from bot.views.findings import diagnosis_text
from llm.client import ChosenModel, first_answer
from llm.logsum import Analysis, LogSummary, TemplateSummary, analyze
from llm.logwindow import mine_window
from ops import cloudlogs
from ops.diagnosis.engine import Diagnosis
from ops.diagnosis.families import Deployment
from ops.diagnosis.placement import ServingNow, is_fatal, place, present, template_note

# LogSeverity names (https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry#logseverity)
SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")


_SINCE = Param("since", "how far back, above 0 (default 1h)", flag="--since", kind=window, metavar="D")
_NODE = Param("node", "only this TPU node", flag="--node", kind=resource_name, metavar="NAME")


@registry.command(
    "logs",
    "Cloud Logging entries of the TPU VMs, newest first",
    _SINCE,
    Param(
        "severity",
        "minimum severity (default: all)",
        flag="--severity",
        kind=one_of(*SEVERITIES),
        metavar="S",
    ),
    _NODE,
    Param(
        "filter",
        "extra Logging query, e.g. 'jsonPayload.message:\"OOM\"' (vLLM's lines) or '\"OOM\"'",
        flag="--filter",
        kind=cloudlogs.validate_filter,
        metavar="F",
    ),
    Param("limit", "entries (default 30)", flag="--limit", kind=int_range(1, 1000), metavar="N"),
    chat_tool=ChatTool(
        "logs", "Recent ERROR log entries of the TPU VMs", params=("since",), preset={"severity": "ERROR"}
    ),
)
def logs(
    ctx: Context,
    since: timedelta | None,
    severity: str | None,
    node: str | None,
    filter: str | None,
    limit: int | None,
) -> Reply:
    span = timedelta(hours=1) if since is None else since
    query = cloudlogs.build_filter(
        span,
        project=ctx.services.settings.gcp_project,
        severity=severity,
        node=node,
        extra=filter,
        now=ctx.services.now(),
    )
    entries = ctx.services.log_entries(query, limit or 30)
    if not entries:
        return blocks_reply([section(f"No log entries match `{query}`.")])
    lines = [
        f"{e.timestamp:%m-%d %H:%M:%S} {e.severity[:4]:<4} {e.node_id or '-'} {_first_line(e.message)}"
        for e in entries
    ]
    # Every line is kept: split into sections here; what exceeds one message goes whole into a file.
    listing = [section(part) for part in split_sections(code("\n".join(lines)))]
    reply = blocks_reply(
        [section(f"*{len(entries)} entries*, newest first"), *listing, context(f"`{query}`")]
    )
    return reply


@registry.command(
    "logs analyze",
    "Group the errors into templates, name known failures, ask Gemma (or the fallback model) for the cause",
    _SINCE,
    _NODE,
    asks_model=True,
)
def logs_analyze(ctx: Context, since: timedelta | None, node: str | None) -> Reply:
    """Read the window within Cloud Logging's read quota (every error, a sample of the rest when the window
    is large: `ops.logreads`) and mine the templates as the entries stream in, both in a worker process
    (`bot.workers`: off the threads that ack); name the known failures (no model needed); then, when there
    are errors, ask the first model that answers (primary vLLM, then LLM_FALLBACK_BASE_URL) within a token
    budget from its context size. Without a model the templates and findings are shown with "Gemma
    unavailable: rules only"; a read cut by the quota, budget or deadline still answers, labelled partial
    with what is missing."""
    settings = ctx.services.settings
    span = timedelta(hours=1) if since is None else since
    query = cloudlogs.build_filter(span, project=settings.gcp_project, node=node, now=ctx.services.now())
    summary, report = ctx.services.workers.run(
        mine_window,
        settings.gcp_project,
        query,
        reads_per_minute=settings.logging_reads_per_min,
        deadline_s=settings.logs_read_deadline_s,
        api_endpoint=settings.google_api_endpoint,
    )
    sampled = report.sample_fraction < 1.0
    size = f"{summary.total_entries:,} entries"
    if sampled:
        size = f"~{size} (estimated)"
    blocks = [header(f"Log analysis: last {span}, {size}")]
    if sampled:
        blocks.append(
            context(
                f"Every error read ({report.error_entries:,}); the rest sampled at "
                f"{report.sample_fraction:.2%} with `sample(insertId, ...)`, counts scaled up. "
                f"{report.reads} reads of Cloud Logging's {settings.logging_reads_per_min} a minute."
            )
        )
    if report.partial:
        blocks.append(
            section(
                ":warning: *Partial:* not read: "
                + "; ".join(report.missing)
                + ". Try a shorter `--since` or `--node`, or again in a minute."
            )
        )
    if summary.error_entries == 0:
        blocks.append(
            section(f":white_check_mark: No errors in the window ({summary.total_entries:,} entries).")
        )
        return blocks_reply(blocks)
    now = serving_now(ctx.services)
    result, chosen, failures = _ask_models(ctx, summary, deployment_of(ctx.services), now)
    placed = place(result.findings, result.templates, now)
    current_templates = present(result.templates, now)
    # what may describe the running container first, then the labelled earlier/other kinds
    ranked = current_templates + tuple(t for t in result.templates if t not in current_templates)
    kinds = [_kind_line(t, now) for t in ranked[:5]]
    blocks.append(section("*Top error kinds*\n" + "\n".join(kinds)))
    # key lines only from what may describe the running container; the rest is shown as earlier/other
    current = replace(result, templates=current_templates, findings=placed.current)
    shown = diagnosis_text(analysis_diagnosis(current, span=span, ended_at=now.stopped_at))
    if shown:
        blocks.append(section(shown))
    elif now.started_at is not None:
        blocks.append(
            section(
                f"No error in the window is placed on the running container (up since {utc(now.started_at)});"
                " what follows is earlier or from another process."
            )
        )
    if placed.earlier:
        heading = "Earlier failures, before the current container started: not the present state"
        blocks.append(section(diagnosis_text(Diagnosis(placed.earlier, ()), heading=heading)))
    if placed.other:
        heading = "Failures of another process or node: not the serving container"
        blocks.append(section(diagnosis_text(Diagnosis(placed.other, ()), heading=heading)))
    if now.missing:
        blocks.append(context("Not placed against the serving container: " + "; ".join(now.missing)))
    notes = [f"{result.included_templates} templates in the prompt"] if chosen else []
    if chosen is not None and result.model_analysis:
        blocks.append(section("*Gemma's analysis*\n" + result.model_analysis[:2800]))
        blocks.append(context(written_by(chosen)))
        budget = f"prompt {result.prompt_tokens or '-'} of {result.budget_tokens or '-'} budget tokens"
        notes += [budget, chosen.context.describe()]
    else:
        blocks.append(section(rules_only(failures, settings)))
    if result.note and chosen is not None:
        notes.append(result.note)
    if notes:
        blocks.append(context(" · ".join(notes)))
    reply = blocks_reply(blocks)
    table = "\n".join(
        f"{t.count}\t{t.severity}\t{t.first_seen:%F %T}\t{t.last_seen:%F %T}\t{t.template}"
        for t in result.templates
    )
    reply.files.append(Attachment("log-templates.tsv", table, "All log templates"))
    return reply


def _kind_line(t: TemplateSummary, now: ServingNow) -> str:
    """One top error kind: count, severity, template, times, its folded traceback lines, and when it does
    not describe the present, why (`ops.diagnosis.placement.template_note`)."""
    line = f"• *{t.count:,}× {t.severity}* `{t.template[:150]}`\n  {utc(t.first_seen)} → {utc(t.last_seen)}"
    if t.traceback_lines:
        line += f" (+{t.traceback_lines:,} traceback lines)"
    note = template_note(t, now, fatal=is_fatal(t))
    return line + (f"\n  _{note}_" if note else "")


def _ask_models(
    ctx: Context, summary: LogSummary, deployment: Deployment, now: ServingNow
) -> tuple[Analysis, ChosenModel | None, list[str]]:
    """Analyze with the first model that answers; a model whose request fails hands over to the next. Each
    model's prompt is counted with its own server's tokenizer (vLLM /tokenize), else the conservative
    estimate; the findings' fixes are written for `deployment`; `now` (what serves) goes in the prompt.

    Returns:
        (the analysis, the model that wrote `model_analysis` or None, why each model could not be used).
    """
    failures: list[str] = []

    def ask(chosen: ChosenModel) -> Analysis:  # raises OpsError when the context is too small for any prompt
        return analyze(
            (),
            chosen.client,
            chosen.context.tokens,
            summary=summary,
            answer_tokens=min(ctx.services.settings.llm_answer_tokens, chosen.context.tokens // 4),
            counter=chosen.counter(),
            deployment=deployment,
            serving=_serving_text(now),
        )

    def unusable(result: Analysis) -> str | None:
        return None if result.model_analysis else result.model_error or "it wrote nothing"

    first = first_answer(ctx.services.models(failures), ask, failures, unusable=unusable)
    if first is None:
        return analyze((), None, 0, summary=summary, deployment=deployment), None, failures
    return first[0], first[1], failures


def _serving_text(now: ServingNow) -> str:
    """What serves now, for the model: errors before the container's start are history."""
    parts = []
    if now.started_at is not None:
        parts.append(
            f"the running vLLM container started at {now.started_at:%Y-%m-%dT%H:%M:%SZ} "
            f"({now.restart_count} restarts); errors last seen before then are history, not the present"
        )
    if now.node:
        parts.append(f"the vLLM endpoint is on node {now.node}")
    if now.max_model_len:
        parts.append(f"it serves max_model_len {now.max_model_len}")
    return "; ".join(parts)


def _first_line(message: str, limit: int = 160) -> str:
    return (message.splitlines() or [""])[0][:limit]
