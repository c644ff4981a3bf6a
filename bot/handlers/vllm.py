"""`/vllm` read-only commands: health, endpoint, models, info, metrics (with `--chart`, the deployment's
metrics history as a PNG: ops/vllm/history.py, ops/charts.py)."""

from __future__ import annotations

import time
from datetime import timedelta

from bot.commands.context import Context
from bot.commands.registry import ChatTool, Param, registry, window
from bot.shared.diagnosis import deployment_of
from bot.shared.identity import identify
from bot.shared.serving import explained_when_starting
from bot.slack.render import Reply, human_duration, utc
from bot.views.findings import identity_line
from bot.views.metrics import chart_reply, ms
from bot.views.vllm import endpoint_found, metrics, served_models, server_info
from bot.views.vllm import health as health_view
from ops.alerts.ledger import AlertLedger
from ops.charts import Event, metrics_chart_png
from ops.diagnosis.engine import diagnose
from ops.errors import BackendTimeout, BadInput, OpsError
from ops.vllm.history import RETENTION, History, series
from ops.vllm.metrics import MetricsSummary, summarize
from ops.vllm.server import ServingSample, VllmClient, serving_problem


@registry.command("vllm health", "vLLM /health plus a one-token chat completion, with latencies")
def vllm_health(ctx: Context) -> Reply:
    """Check /health, then ask the served model for one token; each step's latency is shown. A /health
    200 with requests waiting, none running, no new tokens and a probe timing out is "wedged", not
    healthy (`ops.vllm.server.serving_problem`)."""
    client, endpoint = ctx.services.vllm()
    with client:
        health = client.health()
        identity = identify(ctx.services, client, endpoint, health)
        before = _scrape(client) if health.state == "ready" else None
        if health.state == "not-vllm":  # any OpenAI-compatible server: the completion below is its health
            lines = [f":information_source: {health.detail}"]
        else:
            icon = ":large_green_circle:" if health.state == "ready" else ":red_circle:"
            detail = "" if health.state == "ready" else f": {health.detail}"
            lines = [f"{icon} `/health`: {health.state} in {ms(health.latency_s)}{detail}"]
        started = time.monotonic()
        probe_line, timed_out = _probe(ctx)
        lines.append(probe_line)
        after = _scrape(client) if before is not None else None
    samples = [
        ServingSample(at, s.running, s.waiting, s.generation_tokens)
        for at, s in ((0.0, before), (time.monotonic() - started, after))
        if s is not None
    ]
    wedged = serving_problem(samples, health_ready=health.state == "ready", probe_timed_out=timed_out)
    if wedged:
        lines.insert(0, f":red_circle: *{wedged}*")
    if identity.other:  # every answer above came from something else
        lines.insert(0, identity_line(identity))
    diagnosis = diagnose(wedged, deployment_of(ctx.services)) if wedged else None
    return health_view(lines, diagnosis, endpoint, identity)


def _probe(ctx: Context) -> tuple[str, bool | None]:
    """A one-token chat completion: its line, and whether it timed out (None: it failed otherwise)."""
    try:
        probe = ctx.services.probe()
    except OpsError as exc:
        hint = f" _({exc.hint})_" if exc.hint else ""
        return f":red_circle: chat completion failed: {exc.message}{hint}", (
            True if isinstance(exc, BackendTimeout) else None
        )
    return (
        f":large_green_circle: one-token chat completion from `{probe.model}` in {ms(probe.latency_s)}",
        False,
    )


def _scrape(client: VllmClient) -> MetricsSummary | None:
    """One /metrics summary, or None when it cannot be read (the health answer still stands)."""
    try:
        return client.metrics()
    except OpsError:
        return None


@registry.command("vllm endpoint", "The vLLM URL in use and how it was found")
def vllm_endpoint(ctx: Context) -> Reply:
    endpoint = ctx.services.endpoints.resolve()
    return endpoint_found(endpoint)


@registry.command("vllm models", "Models the server serves, with max_model_len")
def vllm_models(ctx: Context) -> Reply:
    client, endpoint = ctx.services.vllm()
    with client, explained_when_starting(ctx):
        models = client.models()
    return served_models(endpoint, models)


@registry.command("vllm info", "vLLM version and the served model's max_model_len")
def vllm_info(ctx: Context) -> Reply:
    client, endpoint = ctx.services.vllm()
    with client, explained_when_starting(ctx):
        version = client.version()
        models = client.models()
    return server_info(endpoint, version, models)


@registry.command(
    "vllm metrics",
    "Summary of vLLM's Prometheus metrics: load, KV cache, prefix cache, TTFT/ITL/TPOT/E2E",
    Param("raw", "also attach the raw /metrics text", flag="--raw", switch=True),
    Param(
        "chart",
        "attach a PNG of the last SPAN of history, above 0, e.g. 6h",
        flag="--chart",
        kind=window,
        metavar="SPAN",
    ),
    exclusive=(("raw", "chart"),),
    chat_tool=ChatTool("metrics", "vLLM metrics summary: load, KV cache, prefix cache, latencies"),
)
def vllm_metrics(ctx: Context, raw: bool, chart: timedelta | None) -> Reply:
    if chart is not None:
        return _metrics_chart(ctx, chart)
    client, endpoint = ctx.services.vllm()
    with client, explained_when_starting(ctx):
        text = client.metrics_text()
    return metrics(endpoint, summarize(text), text if raw else None)


def _alert_events(ctx: Context, since: timedelta) -> list[Event]:
    """The alerts this deployment's ledger sent in the window, as chart events."""
    now = ctx.services.now()
    rows = AlertLedger(ctx.services.store, ctx.deployment).rows(since=now - since)
    return [Event(row.at, f"alert: {row.kind}") for row in rows]


def _metrics_chart(ctx: Context, span: timedelta) -> Reply:
    """The last `span` of the deployment's sampled metrics, as a PNG attached to the reply.

    Raises:
        BadInput: a span over the retention, or fewer than two samples in it.
    """
    if span > RETENTION:
        raise BadInput(f"history is kept for {human_duration(RETENTION)}", "give a shorter span, e.g. 6h")
    now = ctx.services.now()
    samples = History(ctx.services.store).window(ctx.deployment, now - span, now)
    points, restarts = series(samples)
    events = [Event(at, "vLLM restart") for at in restarts] + _alert_events(ctx, span)
    model = ctx.services.settings.vllm_model
    title = f"{ctx.deployment} · {model} · last {human_duration(span)} (to {utc(now)})"
    png = metrics_chart_png(points, events, title)
    name = f"vllm-metrics-{ctx.deployment}-{int(span.total_seconds() // 60)}m.png"
    return chart_reply(ctx.deployment, model, span, len(samples), len(restarts), len(events), name, png)
