"""The signals the diagnosis engine reads, typed by where they come from. Each is a sequence of lines with
their source and, when known, their time; `ops.diagnosis.engine.diagnose` matches them all at once, so a
finding's evidence says which signal and which moment decided it.

Pure data, no I/O: the callers read the signals (docker over SSH, Cloud Logging, the TPU API, vLLM's
/metrics, a completion, Slack's or the SSH server's answer) and hand them over.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # ops.tpu.model reads ops.gcp.google, which asks this package
    from ops.tpu.model import QueuedResourceInfo

__all__ = [
    "Completion",
    "CreateError",
    "LogLines",
    "MetricsSample",
    "RemoteError",
    "ResourceState",
    "Signal",
    "TimedLine",
    "as_signals",
    "resource_state_text",
]

TimedLine = tuple[datetime | None, str]
"""(time or None, text) of one line: docker's `--timestamps` time, a log entry's `timestamp`."""


@dataclass(frozen=True)
class LogLines:
    """Log lines from one container or system source on the VM, in log order.

    Attributes:
        source: where they were read, e.g. "container" (the vLLM container's `docker logs`),
            "cloud-logging", "journal" (a systemd unit: docker, the startup script), "system" (the VM's
            host events), or "text" for a text of unknown origin.
        lines: (time or None, text) each.
    """

    source: str
    lines: tuple[TimedLine, ...]

    @classmethod
    def of_text(cls, text: str, source: str = "text", at: datetime | None = None) -> LogLines:
        """Lines of a plain text, each with the time `at` (None: unknown)."""
        return cls(source, tuple((at, line) for line in text.splitlines()))

    def timed_lines(self) -> Sequence[TimedLine]:
        """The lines, as given."""
        return self.lines


@dataclass(frozen=True)
class _Text:
    text: str
    at: datetime | None = None

    def timed_lines(self) -> Sequence[TimedLine]:
        """The text's lines, each with the signal's time."""
        return [(self.at, line) for line in self.text.splitlines()]


@dataclass(frozen=True)
class CreateError(_Text):
    """A create (or delete, reset, start) refused by the TPU API: its status and message as one text, e.g.
    "HTTP 429: Quota 'TPUV6EPreemptiblePodPerProjectPerZoneForTPUAPI' exceeded. Limit: 0.0 ..."."""

    source = "tpu-api"


@dataclass(frozen=True)
class MetricsSample(_Text):
    """A sample of vLLM's Prometheus `/metrics` text (https://docs.vllm.ai/en/latest/usage/metrics.html)."""

    source = "metrics"


@dataclass(frozen=True)
class Completion(_Text):
    """The text of a chat completion the served model returned (e.g. tool-call markup left unparsed)."""

    source = "completion"


@dataclass(frozen=True)
class RemoteError:
    """A refusal from Slack (its Web API answer as text, e.g. "... 'error': 'channel_not_found' ...") or
    from SSH (the client's or the remote command's error text).

    Attributes:
        service: "slack" or "ssh" (the evidence's source).
        text: the refusal.
        at: when it was returned, None when unknown.
    """

    service: str
    text: str
    at: datetime | None = None

    @property
    def source(self) -> str:
        """The service, as the evidence's source."""
        return self.service

    def timed_lines(self) -> Sequence[TimedLine]:
        """The refusal's lines, each with its time."""
        return [(self.at, line) for line in self.text.splitlines()]


@dataclass(frozen=True)
class ResourceState:
    """A queued resource's state as the TPU API returns it: its state, a FAILED one's error, each node
    and its state, and the node ids of its spec (one missing under an ACTIVE resource is gone).

    Attributes:
        name, state: the queued resource and its `QueuedResourceState` name.
        error: a FAILED one's `failedData.error.message` ("" for none).
        nodes: (node id, node state) of each node that exists.
        node_ids: the node ids of its spec.
        at: when the state was read, None when unknown.
    """

    name: str
    state: str
    error: str = ""
    nodes: tuple[tuple[str, str], ...] = ()
    node_ids: tuple[str, ...] = ()
    at: datetime | None = None

    source = "tpu-api"

    @classmethod
    def of(cls, qr: QueuedResourceInfo, at: datetime | None = None) -> ResourceState:
        """The signal of one listed queued resource (`ops.tpu.model.QueuedResourceInfo`)."""
        return cls(
            qr.name,
            qr.state,
            qr.error or "",
            tuple((node.name, node.state) for node in qr.nodes),
            tuple(qr.node_ids),
            at,
        )

    def timed_lines(self) -> Sequence[TimedLine]:
        """The state as the catalogue's families read it (`resource_state_text`), each line timed `at`."""
        return [(self.at, line) for line in resource_state_text(self).splitlines()]


def resource_state_text(state: ResourceState) -> str:
    """What the catalogue reads about a queued resource: "queued resource NAME state: STATE", a FAILED
    one's error, "node ID STATE" for each node, and "node ID is gone" for a node of the spec that no longer
    exists while the resource is ACTIVE."""
    lines = [f"queued resource {state.name} state: {state.state}"]
    if state.error:
        lines.append(state.error)
    present = {name for name, _ in state.nodes}
    lines += [f"node {name} {node_state}" for name, node_state in state.nodes]
    if state.state == "ACTIVE":
        lines += [f"node {node_id} is gone" for node_id in state.node_ids if node_id not in present]
    return "\n".join(lines)


Signal = LogLines | CreateError | MetricsSample | Completion | RemoteError | ResourceState
"""Any input of the engine."""


def as_signals(signals: str | Signal | Iterable[Signal]) -> list[Signal]:
    """A list of signals from one signal, several, or a plain text (one `LogLines` of source "text")."""
    if isinstance(signals, str):
        return [LogLines.of_text(signals)]
    if isinstance(signals, LogLines | CreateError | MetricsSample | Completion | RemoteError | ResourceState):
        return [signals]
    return list(signals)
