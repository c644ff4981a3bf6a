"""`/logs` (Cloud Logging entries of the TPU VMs) and `/logs analyze` (error templates and known failure
signatures, which need no model, then the analysis of the first model that answers)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from bot.commands.context import Context
from bot.commands.registry import ChatTool, Param, int_range, one_of, registry, resource_name, window
from bot.shared.diagnosis import analysis_diagnosis, deployment_of, rules_only, serving_now, written_by
from bot.slack.render import Reply
from bot.views.logs import (
    Errors,
    LogAnalysis,
    LogWindow,
    entries_listing,
    log_analysis,
    noted,
    unchecked_line,
)
from bot.views.vllm import log_driver_line
from llm.client import ChosenModel, first_answer
from llm.logsum import Analysis, LogSummary, analyze
from llm.logwindow import mine_window
from ops.diagnosis.engine import Diagnosis, ServingNow, place, present
from ops.diagnosis.families import FixFacts
from ops.errors import OpsError
from ops.gcp import cloudlogs

PROBE_TIMEOUT_S = 3.0
"""Seconds an empty read waits on SSH to tell whether the container logs to Cloud Logging (connect, then
`docker inspect`): the bot's bound, so that a VM that does not answer costs seconds, not the 10 s connect
and 60 s command timeouts of `ops.vllm.ssh.RemoteHost`; a VM that answers does in well under a second."""

# LogSeverity names (https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry#logseverity)
SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")


_SINCE = Param.option("since", "how far back, above 0 (default 1h)", window, "D")
_NODE = Param.option("node", "only this TPU node", resource_name, "NAME")


@registry.command(
    "logs",
    "Cloud Logging entries of the TPU VMs, newest first",
    _SINCE,
    Param.option("severity", "minimum severity (default: all)", one_of(*SEVERITIES), "S"),
    _NODE,
    Param.option(
        "filter",
        "extra Logging query, e.g. 'jsonPayload.message:\"RESOURCE_EXHAUSTED\"' (vLLM's lines) or "
        "'\"out of memory\"' (any field; a quoted word matches inside longer words, any case)",
        cloudlogs.validate_filter,
        "F",
    ),
    Param.option("limit", "entries (default 30)", int_range(1, 1000), "N"),
    Param.toggle("query", "also show the exact Cloud Logging query sent"),
    chat_tool=ChatTool(
        "logs",
        "Recent ERROR log entries of the TPU VMs",
        params=("since",),
        preset={"severity": "ERROR"},
        reads="the recent errors",
    ),
)
def logs(
    ctx: Context,
    since: timedelta | None,
    severity: str | None,
    node: str | None,
    filter: str | None,
    limit: int | None,
    query: bool,
) -> Reply:
    """Read the newest entries of the window (`limit`, default 30) and list them; the footer describes the
    window in words, and gives the exact Cloud Logging query with `--query`."""
    span = timedelta(hours=1) if since is None else since
    now = ctx.services.now()
    sent = cloudlogs.build_filter(
        span,
        project=ctx.services.settings.gcp_project,
        severity=severity,
        node=node,
        extra=filter,
        now=now,
    )
    entries = ctx.services.log_entries(sent, limit or 30)
    window = LogWindow(span, now - span, severity, node, filter, sent, query, hints=not ctx.for_model)
    reply = entries_listing(entries, window)
    return reply if entries else _said(reply, ctx, node)


@registry.command(
    "logs analyze",
    "Group the errors into templates, name known failures, ask Gemma (or the fallback model) for the cause",
    _SINCE,
    _NODE,
    asks_model=True,
)
def logs_analyze(ctx: Context, since: timedelta | None, node: str | None) -> Reply:
    """Read the window within Cloud Logging's read quota (every error, a sample of the rest when the window
    is large: `ops.gcp.logplan`) and mine the templates as the entries stream in, both in a worker process
    (`bot.commands.workers`: off the threads that ack); name the known failures (no model needed); then, when
    there
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
    errors = _errors(ctx, summary, span) if summary.error_entries else None
    reply = log_analysis(
        LogAnalysis(
            span, report, summary.total_entries, summary.error_entries, settings.logging_reads_per_min, errors
        )
    )
    return reply if errors is not None else _said(reply, ctx, node)


def _said(reply: Reply, ctx: Context, node: str | None) -> Reply:
    """`reply` of a read that found nothing (no entries, no errors), with the line of a vLLM container whose
    output does not reach Cloud Logging (`bot.views.vllm.log_driver_line`, its docker state read over SSH
    within PROBE_TIMEOUT_S): the reason it may find nothing. Unchanged when the read was of another node
    than the vLLM endpoint's (SSH to it would not explain it: nothing is waited for), or the container
    logs to Cloud Logging; a VM that does not answer, or cannot be reached, is one labelled line
    (`bot.views.logs.unchecked_line`)."""
    if node is not None and node != _endpoint_node(ctx):
        return reply
    try:
        container, host = ctx.services.container(timeout_s=PROBE_TIMEOUT_S)
        with host:
            status = container.status()
    except OpsError as exc:
        return noted(reply, unchecked_line(ctx.services.settings.vllm_container, exc))
    return noted(reply, log_driver_line(container.name, status, ctx.services.settings.gcp_project))


def _endpoint_node(ctx: Context) -> str:
    """The node of the vLLM endpoint (whose VM SSH reaches), "" when it is not a node or not found."""
    try:
        return ctx.services.endpoints.resolve().node
    except OpsError:
        return ""


def _errors(ctx: Context, summary: LogSummary, span: timedelta) -> Errors:
    """Ask the models, then place the findings against what serves now."""
    now = serving_now(ctx.services)
    result, chosen, failures = _ask_models(ctx, summary, deployment_of(ctx.services), now)
    placed = place(result.findings, result.templates, now)
    current_templates = present(result.templates, now)
    # errors first (the top error kinds are errors: a warning of the running container does not push an
    # error of another process out of them), within each what may describe the running container first,
    # then the labelled earlier/other kinds, each in the summary's order (severity, count, recency)
    ranked = tuple(sorted(result.templates, key=lambda t: (not t.is_error, t not in current_templates)))
    # key lines only from what may describe the running container; the rest is shown as earlier/other
    current = replace(result, templates=current_templates, findings=placed.current)
    return Errors(
        analysis=result,
        now=now,
        ranked=ranked,
        current=analysis_diagnosis(current, span=span, ended_at=now.stopped_at),
        earlier=Diagnosis(placed.earlier, ()),
        other=Diagnosis(placed.other, ()),
        author=written_by(chosen) if chosen is not None else "",
        model_context=chosen.context.describe() if chosen is not None else "",
        rules_only=rules_only(failures, ctx.services.settings) if chosen is None else "",
    )


def _ask_models(
    ctx: Context, summary: LogSummary, facts: FixFacts, now: ServingNow
) -> tuple[Analysis, ChosenModel | None, list[str]]:
    """Analyze with the first model that answers; a model whose request fails hands over to the next. Each
    model's prompt is counted with its own server's tokenizer (vLLM /tokenize), else the conservative
    estimate; the findings' fixes are written with `facts`; `now` (what serves) goes in the prompt.

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
            facts=facts,
            serving=_serving_text(now),
        )

    def unusable(result: Analysis) -> str | None:
        return None if result.model_analysis else result.model_error or "it wrote nothing"

    first = first_answer(ctx.services.models(failures), ask, failures, unusable=unusable)
    if first is None:
        return analyze((), None, 0, summary=summary, facts=facts), None, failures
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
