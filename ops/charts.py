"""Charts of a deployment's metrics history as PNG (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ops.errors import BadInput
from ops.vllm.history import Point

__all__ = ["Event", "metrics_chart_png"]


@dataclass(frozen=True)
class Event:
    """Something that happened to the deployment, drawn as a vertical line: a restart, an alert."""

    at: datetime
    label: str


def _values(points: Sequence[Point], name: str, scale: float = 1.0) -> list[float]:
    """The attribute `name` of each point times `scale`; NaN (a gap in the line) where it is None."""
    return [float("nan") if getattr(p, name) is None else getattr(p, name) * scale for p in points]


def metrics_chart_png(points: Sequence[Point], events: Sequence[Event], title: str) -> bytes:
    """Four stacked panels over time (UTC): KV-cache use (%), running and waiting requests, generation
    tokens/s, and TTFT and TPOT p50 / p95 (ms, log scale); each event is a dashed vertical line on every
    panel, named in the top panel.

    Args:
        points: from `ops.vllm.history.series`, oldest first.
        events: restarts, preemptions, alerts in the window.
        title: the chart's title (deployment, model, window).

    Returns:
        The PNG bytes.

    Raises:
        BadInput: fewer than two points (nothing to draw a line through).
    """
    if len(points) < 2:
        raise BadInput(
            "not enough history to chart (fewer than two samples in the window)",
            "the bot samples vLLM's metrics on its alert schedule; try a longer window or later",
            backend="vllm",
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    import matplotlib.ticker as mticker

    times = [p.at for p in points]
    fig, axes = plt.subplots(4, 1, figsize=(10, 10), sharex=True, constrained_layout=True)
    kv, load, tokens, latency = axes
    kv.plot(times, _values(points, "kv_cache_usage", 100), color="tab:purple", label="KV cache use")
    kv.set_ylabel("KV cache (%)")
    kv.set_ylim(0, 100)
    load.plot(times, _values(points, "running"), color="tab:green", label="running")
    load.plot(times, _values(points, "waiting"), color="tab:red", label="waiting")
    load.set_ylabel("requests")
    tokens.plot(times, _values(points, "generation_tokens_per_s"), color="tab:blue", label="generated")
    tokens.set_ylabel("tokens/s")
    for name, color, style in (
        ("ttft_p50", "tab:orange", "-"),
        ("ttft_p95", "tab:orange", ":"),
        ("tpot_p50", "tab:cyan", "-"),
        ("tpot_p95", "tab:cyan", ":"),
    ):
        label = name.replace("_", " ").upper().replace(" P", " p")
        latency.plot(times, _values(points, name, 1000), color=color, linestyle=style, label=label)
    latency.set_ylabel("latency (ms, log scale)")
    latency.set_yscale("log")  # TPOT (tens of ms) and TTFT (hundreds) on one panel
    latency.yaxis.set_major_formatter(mticker.FuncFormatter(lambda value, _: f"{value:g}"))
    # Label only the 2x and 5x minor ticks: all of them overlap on a panel this high.
    latency.yaxis.set_minor_formatter(
        mticker.FuncFormatter(lambda value, _: f"{value:g}" if f"{value:g}"[0] in "25" else "")
    )
    latency.set_xlabel("time (UTC)")
    latency.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=times[0].tzinfo))
    for axis in (kv, load, tokens):
        axis.set_ylim(bottom=0)
    for axis in axes:
        axis.grid(True, alpha=0.3)
        for event in events:
            axis.axvline(event.at, color="grey", linestyle="--", linewidth=1)
        axis.legend(loc="upper left", fontsize="small", framealpha=0.9, ncols=2)
    for event in events:
        kv.annotate(
            event.label[:40],
            (mdates.date2num(event.at), 100),
            xytext=(3, -3),
            textcoords="offset points",
            rotation=90,
            va="top",
            fontsize="x-small",
            color="dimgrey",
        )
    fig.suptitle(title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()
