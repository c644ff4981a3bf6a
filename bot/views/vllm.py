"""The vLLM server as Slack blocks: /vllm health, endpoint, models, info and metrics."""

from __future__ import annotations

from bot.slack.render import Attachment, Block, Reply, blocks_reply, context, header, section
from bot.views.findings import diagnosis_text
from bot.views.metrics import metrics_lines
from ops.diagnosis.engine import Diagnosis
from ops.vllm.endpoint import Endpoint
from ops.vllm.metrics import MetricsSummary
from ops.vllm.server import ModelCard, ServerIdentity


def health(lines: list[str], wedged: Diagnosis | None, endpoint: Endpoint, identity: ServerIdentity) -> Reply:
    """`/vllm health`: the check's lines (mrkdwn, one per step), the diagnosis of a wedged server, and the
    endpoint with what the identity check compared."""
    blocks: list[Block] = [section("\n".join(lines))]
    if wedged is not None:
        blocks.append(section(diagnosis_text(wedged)))
    blocks.append(context(f"Endpoint `{endpoint.url}` ({endpoint.source})" + _checked(identity)))
    return blocks_reply(blocks)


def _checked(identity: ServerIdentity) -> str:
    """What the identity check compared, for the context line ("" when it could not be made)."""
    if identity.verdict != "same":
        return ""
    return " · answered by the deployment's container (checked: " + ", ".join(identity.checked) + ")"


def endpoint_found(endpoint: Endpoint) -> Reply:
    """`/vllm endpoint`: the URL in use and how it was found."""
    return blocks_reply([section(f"vLLM endpoint `{endpoint.url}`\n_Found from: {endpoint.source}_")])


def served_models(endpoint: Endpoint, models: list[ModelCard]) -> Reply:
    """`/vllm models`: one line per served model (max_model_len, root, the base of an adapter)."""
    if not models:
        return blocks_reply([section(f"`{endpoint.url}` serves no models.")])
    lines = []
    for m in models:
        extra = f", adapter of `{m.parent}`" if m.parent else ""
        root = f", root `{m.root}`" if m.root and m.root != m.id else ""
        lines.append(f"• `{m.id}`: max_model_len {m.max_model_len or '-'}{root}{extra}")
    return blocks_reply(
        [section("*Served models*\n" + "\n".join(lines)), context(f"Endpoint `{endpoint.url}`")]
    )


def server_info(endpoint: Endpoint, version: str, models: list[ModelCard]) -> Reply:
    """`/vllm info`: the vLLM version and each served model's max_model_len."""
    model_lines = [f"• `{m.id}`: max_model_len {m.max_model_len or '-'}" for m in models] or ["• (none)"]
    return blocks_reply([section(f"*vLLM* {version} at `{endpoint.url}`\n" + "\n".join(model_lines))])


def metrics(endpoint: Endpoint, summary: MetricsSummary, raw: str | None) -> Reply:
    """`/vllm metrics`: the summary's lines, the models and endpoint, and with `raw` (the /metrics text)
    that scrape attached, never pasted (it is kilobytes long)."""
    models = ", ".join(f"`{m}`" for m in summary.models) or "unknown model"
    reply = blocks_reply(
        [
            header("vLLM metrics"),
            section("\n".join(metrics_lines(summary))),
            context(f"{models} at `{endpoint.url}` · counters since server start"),
        ]
    )
    if raw is not None:
        reply.blocks.append(context(f"Raw `/metrics` scrape attached ({len(raw.splitlines()):,} lines)."))
        reply.files.append(Attachment("metrics.txt", raw, "Raw /metrics"))
    return reply
