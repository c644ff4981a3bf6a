"""The vLLM container as Slack blocks: /vllm status, the container's log and the VM's journal, and a
disruptive verb's preview and result (start, stop, restart, rm)."""

from __future__ import annotations

from bot.slack.render import Attachment, Reply, blocks_reply, code, context, section
from bot.views.findings import diagnosis_text
from ops.diagnosis.engine import Diagnosis

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


def container_change(text: str) -> Reply:
    """A container verb's preview or result: `text` (mrkdwn: what it does or did, and the state) in one
    section."""
    return blocks_reply([section(text)])
