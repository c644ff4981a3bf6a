"""After `/vllm stop`, `/tpu status` says what it read of the container (exited, its code and time, the stop
from the audit trail) and the command that starts it, never "booting" (`bot.shared.serving.not_serving`).
Signed Slack requests to the real bot; the container read over SSH from the simulated TPU VM."""

from __future__ import annotations

from datetime import datetime

from sim.demo import Demo


def _say(demo: Demo, line: str, timeout: float = 30) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


def test_status_after_a_stop_says_the_container_exited_and_who_stopped_it(world: Demo) -> None:
    preview = _say(world, "/vllm stop")  # its node's create time as every answer shows a time, not RFC 3339
    created = preview.split("node `gemma4-qr-node` of `gemma4-qr`, created ", 1)[1].split(")", 1)[0]
    assert datetime.strptime(created, "%Y-%m-%d %H:%M UTC"), created
    _say(world, "click Confirm", timeout=60)
    status = _say(world, "/tpu status")
    assert "booting" not in status, status
    assert "vLLM is not running: container `vllm` exited with code 0 at " in status, status
    assert "stopped by <@U0DEMOUSR1> with `/vllm stop` (from the audit trail)" in status, status
    assert "start it with /vllm start" in status, status
