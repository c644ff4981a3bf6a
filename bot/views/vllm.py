"""The vLLM server as Slack blocks: /vllm health, endpoint, models, info and metrics, and its container: /vllm
status, the container's log and the VM's journal."""

from __future__ import annotations

from bot.slack.render import Attachment, Block, Reply, blocks_reply, code, context, header, section
from bot.views.findings import diagnosis_text
from bot.views.metrics import metrics_lines
from ops.diagnosis.engine import Diagnosis
from ops.gcp.cloudlogs import NODE_LABEL
from ops.vllm.container import ContainerStatus, LogRoute
from ops.vllm.dockerrun import UNKNOWN_NODE
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
            context(
                f"{models} at `{endpoint.url}`"
                + ("" if summary.started_at else " · counters since server start")
            ),
        ]
    )
    if raw is not None:
        reply.blocks.append(context(f"Raw `/metrics` scrape attached ({len(raw.splitlines()):,} lines)."))
        reply.files.append(Attachment("metrics.txt", raw, "Raw /metrics"))
    return reply


SHOWN_LOG_LINES = 25
SHOWN_LOG_CHARS = 2800  # the tail shown in one section (a section holds 3,000)


def container_status(name: str, host: str, state: str, diagnosis: Diagnosis) -> Reply:
    """`/vllm status`: the container `name` on `host`, its `state` lines (mrkdwn), and the diagnosis of its
    log when it names a failure."""
    blocks = [section(f"*vLLM container* `{name}` on `{host}`\n" + state)]
    shown = diagnosis_text(diagnosis)
    if shown:
        blocks.append(section(shown))
    return blocks_reply(blocks)


def log_excerpt(title: str, text: str, filename: str, diagnosis: Diagnosis) -> Reply:
    """The last SHOWN_LOG_LINES lines of `text` as code under `title`, the diagnosis, and the whole text
    attached as `filename` when it is longer."""
    lines = text.splitlines()
    shown = "\n".join(lines[-SHOWN_LOG_LINES:]) or "(no lines)"
    blocks = [
        section(f"*{title}*: last {min(len(lines), SHOWN_LOG_LINES)} of {len(lines)} lines"),
        section(code(shown[-SHOWN_LOG_CHARS:])),
    ]
    found = diagnosis_text(diagnosis)
    if found:
        blocks.append(section(found))
    reply = blocks_reply(blocks)
    if len(lines) > SHOWN_LOG_LINES:
        reply.files.append(Attachment(filename, text, title.replace("`", "")))
        reply.blocks.append(context(f"The whole output is attached as `{filename}`."))
    return reply


def no_log_match(name: str, grep: str, tail: int, since: str | None) -> Reply:
    """`/vllm logs --grep TEXT` that matched nothing: which lines were searched (the last `tail` of container
    `name`'s log, within `since` when given, e.g. "1h") and what to try instead."""
    within = f" (written in the last {since})" if since else ""
    shown = grep.replace("`", "'")  # a backtick would end the code span early
    return blocks_reply(
        [
            section(
                f"No line of the last {tail:,}{within} of the `{name}` log matches `{shown}` "
                "(the exact text, case-sensitive)."
            ),
            context(
                "Try a longer `--tail` (up to 10000), a shorter part of the text, or `/vllm logs` without "
                "`--grep` to read the lines; `/logs analyze` reads what reached Cloud Logging."
            ),
        ]
    )


def log_route_line(route: LogRoute | None) -> str:
    """The one line a container the bot ran needs about its output: Docker refused the gcplogs driver (it
    will not reach Cloud Logging: why, and the role to grant, as deploy/gcp-setup.sh grants it), or the VM
    named no TPU node for its entries' label; "" when its output reaches Cloud Logging as the startup
    script's does, or no container was run (None)."""
    if route is None:
        return ""
    if route.refused is not None:
        return (
            ":warning: Its output will not reach Cloud Logging: Docker refused the gcplogs log driver "
            f"(`{route.refused}`). Grant the VM's service account `roles/logging.logWriter` on "
            f"`{route.project}` (deploy/gcp-setup.sh does), then `/vllm restart`; until then `/logs`, "
            "`/logs analyze` and log alerts do not see it, `/vllm logs` does."
        )
    if route.node == UNKNOWN_NODE:
        return (
            f":warning: Its Cloud Logging entries are labelled `{NODE_LABEL}={UNKNOWN_NODE}`: the VM's "
            "`tpu-env` metadata names no TPU node, so `/logs --node` and the diagnosis of a node do not find "
            "them."
        )
    return ""


def log_driver_line(name: str, status: ContainerStatus, project: str) -> str:
    """The one line a container whose output stays on the VM needs, wherever its state is read: it logs with
    another driver than Docker's gcplogs (`docker inspect` HostConfig.LogConfig.Type; the startup script or
    the bot fell back to Docker's default where the driver was refused, or it was run by hand), so Cloud
    Logging has none of it; "" when it logs with gcplogs, does not exist, or docker does not say."""
    if not status.exists or status.log_driver in (None, "gcplogs"):
        return ""
    return (
        f":warning: The output of `{name}` does not reach Cloud Logging: it logs with Docker's "
        f"`{status.log_driver}` driver, not gcplogs. Grant the VM's service account "
        f"`roles/logging.logWriter` on `{project}`, then `/vllm restart`; until then `/logs`, "
        "`/logs analyze` and log alerts do not see it, `/vllm logs` does."
    )


def container_change(text: str) -> Reply:
    """A container verb's preview or result: `text` (mrkdwn: what it does or did, and the state) in one
    section."""
    return blocks_reply([section(text)])
