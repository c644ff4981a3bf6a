"""While vLLM loads, commands that need it say it is starting and when it is expected to answer (from the
container's start read over SSH), never the tool's raw connection error."""

from __future__ import annotations

from sim.demo import Demo
from tests.handlers.conftest import Handlers


def _restart_slowly(world: Demo) -> None:
    """Restart the container with a boot the test outlives (the simulator's vLLM is down meanwhile)."""
    docker = world.host.docker
    docker.config["boot_s"] = 600
    code, _, err = docker.run("restart", [world.settings.vllm_container], {})
    assert code == 0, err


def test_vllm_commands_while_it_starts_say_starting_and_when(world: Demo) -> None:
    _restart_slowly(world)
    handlers = Handlers(world)
    for line in ("vllm bench --prompts 4", "vllm models", "vllm info", "vllm metrics", "gemma ask hello"):
        text = handlers.run(line)
        assert f"vLLM is starting: container `{world.settings.vllm_container}` up 0 min" in text, (line, text)
        assert "expected to answer around " in text and "10 min from now" in text, (line, text)
        assert "the bot's estimate for a 31B model on TPU (weights download, then XLA compilation)" in text
        assert "Cannot connect" not in text and "benchmark arguments" not in text
        assert "run the command again once it answers" in text
    assert "starting" in handlers.run("vllm status")


def test_a_stopped_container_is_said_with_the_command_that_starts_it(world: Demo) -> None:
    code, _, err = world.host.docker.run("stop", [world.settings.vllm_container], {})
    assert code == 0, err
    text = Handlers(world).run("vllm bench --prompts 4")
    name = world.settings.vllm_container
    assert f"vLLM is not running: container `{name}` exited with code 0 at 20" in text, text
    assert "/vllm start" in text and "audit trail" not in text, text  # stopped outside the bot: no one named
    assert "it then loads for about 10 min: the bot's estimate" in text
    assert "Benchmarking" not in text
