"""Formatting shared by several commands (the metrics summary appears in /vllm metrics and /tpu status;
money and cost estimates in /tpu cost, the create and delete previews, alerts and the digest)."""

from __future__ import annotations

from ops import cost
from ops.errors import BadInput
from ops.metrics import MetricsSummary, Quantiles

PRICING_PAGE = "https://cloud.google.com/tpu/pricing"


def usd(amount: float) -> str:
    """US dollars with cents and thousands separators: "$1,234.56"."""
    return f"${amount:,.2f}"


def per_hour(amount: float) -> str:
    """A rate in US dollars per hour: "$21.60/h"."""
    return f"{usd(amount)}/h"


def estimate_line(e: cost.CostEstimate) -> str:
    """One estimate: "*v6e-8* (8 chips) on-demand in us-east5: $2.700 per chip-hour = *$21.60/h*; 4 h =
    *$86.40*" (its source goes in `sources_line`)."""
    return (
        f"*{e.accelerator_type}* ({e.chips} chips) {e.model} in {e.region}: "
        f"${e.usd_per_chip_hour:,.3f} per chip-hour = *{per_hour(e.usd_per_hour)}*; "
        f"{e.hours:g} h = *{usd(e.total_usd)}*"
    )


def sources_line(estimates: list[cost.CostEstimate]) -> str:
    """ "_Price source: SOURCE, as of DATE._" once for every distinct source of `estimates`."""
    sources = dict.fromkeys(f"{e.source}, as of {e.as_of}" for e in estimates)
    return "_Price source: " + "; ".join(sources) + "._"


def estimate_lines(accelerator_type: str, hours: float, model: str, region: str) -> list[str]:
    """The estimate for `model` and its source; when `model` has no sourced price, the refusal and the
    estimates of the models that have one (never a guessed figure).

    Raises:
        BadInput: a malformed type, hours or region (what `ops.cost.estimate` raises for them).
    """
    try:
        estimate = cost.estimate(accelerator_type, hours, model, region)
    except BadInput as refused:
        known = cost.sourced_estimates(accelerator_type, hours, region)
        if not known:
            raise
        lines = [f":no_entry: {refused.message} (no public, dated source: refused, not guessed)."]
        lines.append("Sourced prices for comparison:")
        lines += [f"• {estimate_line(e)}" for e in known]
        lines.append(sources_line(known))
        lines.append(f"_Check {PRICING_PAGE} for {model}._")
        return lines
    return [estimate_line(estimate), sources_line([estimate])]


def ms(seconds: float | None) -> str:
    """Seconds as whole milliseconds, "-" when unknown."""
    return "-" if seconds is None else f"{seconds * 1000:,.0f} ms"


def _quantiles(label: str, q: Quantiles | None) -> str | None:
    if q is None or q.count == 0:
        return None
    return f"{label} p50 {ms(q.p50)} · p95 {ms(q.p95)} · mean {ms(q.mean)} ({q.count:,} samples)"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def metrics_lines(m: MetricsSummary) -> list[str]:
    """A metrics summary as markdown lines: load, KV cache, prefix cache, tokens, latency quantiles."""
    kv = "-" if m.kv_cache_usage is None else f"{m.kv_cache_usage:.1%}"
    hit = "-" if m.prefix_cache_hit_rate is None else f"{m.prefix_cache_hit_rate:.1%}"
    lines = [
        f"*Requests* running {_num(m.running)} · waiting {_num(m.waiting)}"
        f" · preemptions {_num(m.preemptions)}",
        f"*KV cache* usage {kv} · *prefix cache* hit rate {hit}"
        + (
            f" ({_num(m.prefix_cache_hits)} of {_num(m.prefix_cache_queries)} tokens)"
            if m.prefix_cache_queries
            else ""
        ),
        f"*Tokens* prompt {_num(m.prompt_tokens)} · generated {_num(m.generation_tokens)}",
    ]
    lines += [
        line
        for line in (
            _quantiles("*TTFT*", m.ttft),
            _quantiles("*ITL*", m.itl),
            _quantiles("*TPOT*", m.tpot),
            _quantiles("*E2E*", m.e2e),
        )
        if line
    ]
    if len(m.engines) > 1:
        lines.append(f"_Engines: {', '.join(m.engines)} (summed; KV cache is the fullest engine)._")
    if m.deprecated_names:
        lines.append(
            "_Read deprecated metric names: " + ", ".join(f"`{n}`" for n in m.deprecated_names) + "._"
        )
    return lines
