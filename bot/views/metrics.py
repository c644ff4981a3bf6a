"""vLLM metrics as text: the summary lines of /vllm metrics, /tpu status and the chat facts, and
latencies in milliseconds."""

from __future__ import annotations

from datetime import timedelta

from bot.slack.render import Attachment, Reply, blocks_reply, context, human_duration, section
from ops.vllm.metrics import MetricsSummary, Quantiles


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
        # vLLM's scheduler preempting requests for KV-cache space (vllm:num_preemptions_total), not a TPU
        # preemption: the words say whose.
        f" · preempted by vLLM {_num(m.preemptions)} (KV cache full)",
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


def chart_reply(
    deployment: str,
    model: str,
    span: timedelta,
    samples: int,
    restarts: int,
    events: int,
    name: str,
    png: bytes,
) -> Reply:
    """/vllm metrics --chart: a summary of the window (`samples` sampled, `restarts` of vLLM, `events` marks
    in all, restarts included) and the chart `png` attached as `name`."""
    summary = (
        f"*vLLM metrics history* of `{deployment}` (`{model}`), last {human_duration(span)}: "
        f"{samples} samples, {restarts} restart(s), {events - restarts} alert(s) marked."
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
