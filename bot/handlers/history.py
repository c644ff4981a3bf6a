"""`/vllm metrics --chart SPAN`: the deployment's metrics history as a PNG (ops/history.py, ops/charts.py)."""

from __future__ import annotations

from datetime import timedelta

from bot.context import Context
from bot.render import Attachment, Reply, blocks_reply, context, human_duration, section, utc
from ops.alerts import AlertLedger
from ops.charts import Event, metrics_chart_png
from ops.errors import BadInput
from ops.history import RETENTION, History, series

__all__ = ["metrics_chart"]


def _alert_events(ctx: Context, since: timedelta) -> list[Event]:
    """Alerts of this deployment sent in the window: queued-resource alerts of its zones, and vLLM alerts
    when it is the deployment the alert scheduler watches (the first one)."""
    now = ctx.services.now()
    watched = ctx.fleet is None or ctx.fleet.names[0] == ctx.deployment
    zones = ctx.services.settings.tpu_zones
    events = []
    for row in AlertLedger(ctx.services.store).rows(since=now - since):
        mine = watched if row.resource.startswith("vllm:") else row.resource.split("/", 1)[0] in zones
        if mine:
            events.append(Event(row.at, f"alert: {row.kind}"))
    return events


def metrics_chart(ctx: Context, span: timedelta) -> Reply:
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
    summary = (
        f"*vLLM metrics history* of `{ctx.deployment}` (`{model}`), last {human_duration(span)}: "
        f"{len(samples)} samples, {len(restarts)} restart(s), {len(events) - len(restarts)} alert(s) marked."
    )
    reply = blocks_reply(
        [
            section(summary),
            context(
                f"Chart: {name} (KV cache %, running / waiting, generated tokens/s, TTFT and TPOT p50 / p95)"
            ),
        ]
    )
    reply.files.append(Attachment(name, png, "vLLM metrics history"))
    return reply
