"""`/logs` (Cloud Logging entries of the TPU VMs) and `/logs analyze` (error templates, Gemma's analysis,
known failure signatures)."""

from __future__ import annotations

from datetime import timedelta

from bot.commands import Param, duration, int_range, registry, resource_name
from bot.context import Context
from bot.diagnosis import analysis_diagnosis, deployment_of, diagnosis_text
from bot.render import Attachment, Reply, blocks_reply, code, context, header, section, split_sections, utc
from llm.logsum import analyze_summary
from llm.logwindow import mine_window
from llm.tokens import PromptCounter
from ops import cloudlogs
from ops.errors import NotFound

SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")


def severity(word: str) -> str:
    """A LogSeverity name (https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry#logseverity)."""
    upper = word.upper()
    if upper not in SEVERITIES:
        raise ValueError(f"{word!r} is not a severity ({', '.join(SEVERITIES)})")
    return upper


_SINCE = Param("since", "how far back (default 1h)", flag="--since", kind=duration, metavar="D")
_NODE = Param("node", "only this TPU node", flag="--node", kind=resource_name, metavar="NAME")


@registry.command(
    "logs",
    "Cloud Logging entries of the TPU VMs, newest first",
    _SINCE,
    Param("severity", "minimum severity (default: all)", flag="--severity", kind=severity, metavar="S"),
    _NODE,
    Param(
        "filter",
        "extra Logging query, e.g. 'textPayload:\"OOM\"'",
        flag="--filter",
        kind=cloudlogs.validate_filter,
        metavar="F",
    ),
    Param("limit", "entries (default 30)", flag="--limit", kind=int_range(1, 1000), metavar="N"),
)
def logs(
    ctx: Context,
    since: timedelta | None,
    severity: str | None,
    node: str | None,
    filter: str | None,
    limit: int | None,
) -> Reply:
    settings = ctx.services.settings
    query = cloudlogs.build_filter(
        since or timedelta(hours=1), severity=severity, node=node, extra=filter, now=ctx.services.now()
    )
    entries = list(
        cloudlogs.fetch(
            settings.gcp_project, query, limit=limit or 30, api_endpoint=settings.google_api_endpoint
        )
    )
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
    "Group the errors into templates, ask Gemma for the root cause, name known failures",
    _SINCE,
    _NODE,
)
def logs_analyze(ctx: Context, since: timedelta | None, node: str | None) -> Reply:
    """Read the window within Cloud Logging's read quota (every error, a sample of the rest when the window
    is large: `ops.logreads`), mine the templates as the entries stream in, both in a worker process
    (`bot.workers`: off the threads that ack), fit a token budget derived from the served model's
    max_model_len, and ask the model; without errors in the window the model is not asked. A read cut by
    the quota, budget or deadline still answers, labelled partial with what is missing."""
    settings = ctx.services.settings
    window = since or timedelta(hours=1)
    query = cloudlogs.build_filter(window, node=node, now=ctx.services.now())
    summary, report = ctx.services.workers.run(
        mine_window,
        settings.gcp_project,
        query,
        reads_per_minute=settings.logging_reads_per_min,
        deadline_s=settings.logs_read_deadline_s,
        api_endpoint=settings.google_api_endpoint,
    )
    gemma, _ = ctx.services.gemma()
    with gemma:
        max_model_len = _max_model_len(ctx)
        # Counted with the served model's tokenizer (vLLM /tokenize) when it has one.
        counter = PromptCounter(gemma.base_url, gemma.model, api_key=gemma.openai.api_key)
        result = analyze_summary(
            summary, gemma, max_model_len, counter=counter, deployment=deployment_of(ctx.services)
        )
    sampled = report.sample_fraction < 1.0
    size = f"{result.total_entries:,} entries"
    if sampled:
        size = f"~{size} (estimated)"
    blocks = [header(f"Log analysis: last {window}, {size}")]
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
    if result.error_entries == 0:
        blocks.append(
            section(f":white_check_mark: No errors in the window ({result.total_entries:,} entries).")
        )
        return blocks_reply(blocks)
    top = result.top(5)
    kinds = [
        f"• *{t.count:,}× {t.severity}* `{t.template[:150]}`\n  {utc(t.first_seen)} → {utc(t.last_seen)}"
        for t in top
    ]
    blocks.append(section("*Top error kinds*\n" + "\n".join(kinds)))
    if result.model_analysis:
        blocks.append(section("*Gemma's analysis*\n" + result.model_analysis[:2800]))
    elif result.model_error:
        blocks.append(section(f":red_circle: Gemma could not be asked: {result.model_error}"))
    shown = diagnosis_text(analysis_diagnosis(result))
    if shown:
        blocks.append(section(shown))
    budget = f"prompt {result.prompt_tokens or '-'} of {result.budget_tokens or '-'} budget tokens"
    blocks.append(
        context(f"{result.included_templates} templates in the prompt · {budget} · {result.note}".strip(" ·"))
    )
    reply = blocks_reply(blocks)
    table = "\n".join(
        f"{t.count}\t{t.severity}\t{t.first_seen:%F %T}\t{t.last_seen:%F %T}\t{t.template}"
        for t in result.templates
    )
    reply.files.append(Attachment("log-templates.tsv", table, "All log templates"))
    return reply


def _first_line(message: str, limit: int = 160) -> str:
    return (message.splitlines() or [""])[0][:limit]


def _max_model_len(ctx: Context) -> int:
    client, _ = ctx.services.vllm()
    with client:
        models = client.models()
    lengths = [m.max_model_len for m in models if m.max_model_len]
    if not lengths:
        raise NotFound("the served model reports no max_model_len", "check /vllm models")
    return min(lengths)
