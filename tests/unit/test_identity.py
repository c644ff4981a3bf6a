"""The identity verdict of `ops.vllm.server.server_identity` (pure): what answers on the vLLM port is the
bot's
container only when every check that can be made agrees; a source that is unknown is left out, and an
unreadable container claims nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ops.vllm.container import ContainerStatus, exit_reason, served_names
from ops.vllm.server import server_identity, server_start_time

STARTED = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)
COMMAND = ("vllm", "serve", "google/gemma-4-31B-it", "--port", "8000", "--max-model-len", "16384")


def running(command: tuple[str, ...] = COMMAND) -> ContainerStatus:
    return ContainerStatus(True, "running", "vllm/vllm-tpu:gemma4", STARTED, 0, True, command=command)


def test_the_container_serving_on_its_port_is_the_same() -> None:
    identity = server_identity(
        running(), answered=True, port=8000, served=("google/gemma-4-31B-it",), server_started=STARTED
    )
    assert identity.verdict == "same" and identity.line() == ""
    assert identity.checked == ("container running", "model", "start time")


def test_an_exited_container_with_something_answering_says_so_with_its_exit_reason() -> None:
    exited = ContainerStatus(
        True, "exited", "vllm/vllm-tpu:gemma4", STARTED, 0, False, 1, STARTED + timedelta(minutes=3)
    )
    log = "(APIServer pid=1) INFO ...\nOSError: [Errno 98] Address already in use\n"
    identity = server_identity(
        exited, answered=True, port=8000, served=("google/gemma-4-31B-it",), exit_reason=exit_reason(log)
    )
    assert identity.other
    assert identity.line() == (
        "the vLLM container exited at 10:03 UTC (address already in use); something else answers on :8000 "
        "(serving `google/gemma-4-31B-it`)"
    )


def test_another_model_another_port_or_an_older_process_is_something_else() -> None:
    other_model = server_identity(running(), answered=True, port=8000, served=("google/gemma-3-27b-it",))
    assert other_model.other and "the vLLM container serves `google/gemma-4-31B-it`" in other_model.line()
    other_port = server_identity(running(), answered=True, port=8001)
    assert other_port.other and "listens on :8000, not :8001" in other_port.line()
    older = server_identity(running(), answered=True, port=8000, server_started=STARTED - timedelta(hours=2))
    assert (
        older.other and "started at 08:00 UTC, before the vLLM container started at 10:00 UTC" in older.line()
    )
    close = server_identity(
        running(), answered=True, port=8000, server_started=STARTED - timedelta(seconds=2)
    )
    assert close.verdict == "same"  # the same clock: only rounding separates the two


def test_unknown_sources_claim_nothing() -> None:
    assert server_identity(None, answered=True, port=8000, note="no SSH").verdict == "unknown"
    assert server_identity(running(), answered=False, port=8000).verdict == "silent"
    assert server_identity(running(), answered=True, port=8000).checked == ("container running",)


def test_served_names_follow_vllm_serve() -> None:
    assert served_names(COMMAND) == ("google/gemma-4-31B-it",)
    assert served_names(("vllm", "serve", "m", "--served-model-name", "gemma", "g4", "--port", "1")) == (
        "gemma",
        "g4",
    )
    assert served_names(("vllm", "serve", "--model", "org/m")) == ("org/m",)
    assert served_names(("python", "app.py")) == ()


def test_server_start_time_from_the_process_collector() -> None:
    text = (
        "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n"
        "# TYPE process_start_time_seconds gauge\n"
        f"process_start_time_seconds {STARTED.timestamp():.2f}\n"
    )
    assert server_start_time(text) == STARTED
    assert server_start_time("vllm:num_requests_running 0\n") is None
