"""`/logs analyze` within Slack's limits, through the runner against the demo world's simulators (the real
Logging client on the Google emulator): every section keeps its heading and whole lines, what does not fit
is in the attached file and said to be; the top error kinds are errors, a TPU held by another process
among them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
import yaml

from bot.slack.limits import MESSAGE_BLOCK_TEXT_LIMIT, SECTION_TEXT_LIMIT
from bot.views.logs import ANALYSIS_FILE
from sim.demo import Demo
from sim.gcp.world import serving_since
from sim.scenario import load
from sim.slack import Message
from tests.handlers.conftest import Handlers

# JAX's refusal when another process holds the TPU (https://github.com/jax-ml/jax/issues/13260), in the
# container's output as docker's gcplogs driver sends it.
TPU_IN_USE = (
    "jaxlib.xla_extension.XlaRuntimeError: ABORTED: The TPU is already in use by process with pid 4242. "
    "Not attempting to load libtpu.so in this process."
)
HEADINGS = (
    "*Top error kinds*",
    "*Known failures in the log*",
    "*Earlier failures, before the current container started: not the present state*",
    "*Failures of another process or node: not the serving container*",
    "*Gemma's analysis*",
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """The default world, its TPU also refused to a second container by JAX's own words 8 times from
    17 to 10 minutes ago."""
    scenario = load(None)
    for minutes in range(10, 18):
        scenario["google"]["logs"]["entries"].append(
            {"at": f"-{minutes}m", "text": TPU_IN_USE, "payload": "container"}
        )
    path = tmp_path_factory.mktemp("scenario") / "analyze.yaml"
    path.write_text(yaml.safe_dump(scenario))
    with Demo(path) as demo:
        yield demo


def _analyze(world: Demo) -> tuple[Message, list[Message]]:
    start = len(world.slack.messages)
    Handlers(world).run("logs analyze --since 1h")
    sent = [m for m in world.slack.messages[start:] if m.kind != "user"]
    answer = next(m for m in reversed(sent) if m.kind != "file" and "Log analysis" in m.render())
    return answer, [m for m in sent if m.kind == "file"]


def _texts(message: Message) -> list[str]:
    return [str(b["text"]["text"]) for b in message.blocks if isinstance(b.get("text"), dict)]


def test_every_section_keeps_its_heading_within_slacks_limits(world: Demo) -> None:
    """A model analysis longer than the message holds: every section still shows, each under Slack's
    limits, the analysis cut between its paragraphs and said to be, whole in the attached file."""
    paragraphs = [f"Paragraph {n}: " + " ".join(f"reason{n}x{i}" for i in range(30)) for n in range(40)]
    world.vllm.script_chat([{"text": "\n".join(paragraphs)}])
    answer, files = _analyze(world)
    texts = _texts(answer)
    shown = "\n".join(texts)
    for heading in HEADINGS:
        assert heading in shown, heading
    assert all(len(text) <= SECTION_TEXT_LIMIT for text in texts)
    assert sum(len(text) for text in texts) <= MESSAGE_BLOCK_TEXT_LIMIT
    assert "Longer than Slack allows" not in answer.render()  # nothing left to the gateway's cut
    analysis = shown[shown.index("*Gemma's analysis*") :]
    kept = [p for p in paragraphs if p in analysis]
    assert kept and kept == paragraphs[: len(kept)] and len(kept) < len(paragraphs)  # whole paragraphs
    assert f"more items not shown here: the whole analysis is in `{ANALYSIS_FILE}`._" in analysis
    whole = next(f for f in files if f.filename == ANALYSIS_FILE).content.decode()
    written = [p for p in paragraphs if p in whole]  # as much as the model wrote within its max_tokens
    assert written[: len(kept)] == kept and len(written) > len(kept) and "hf-gated-repo-401" in whole


def test_top_error_kinds_are_errors_the_tpu_in_use_among_them(world: Demo) -> None:
    answer, _ = _analyze(world)
    shown = "\n".join(_texts(answer))
    top = shown[shown.index("*Top error kinds*") : shown.index("*Known failures in the log*")]
    kinds = [line for line in top.splitlines() if line.startswith("• ")]
    assert len(kinds) == 5 and all(" ERROR* " in kind for kind in kinds), kinds
    assert (
        "*8× ERROR* `jaxlib.xla_extension.XlaRuntimeError: ABORTED: The TPU is already in use by process"
        in top
    )
    other = shown.split("*Failures of another process or node: not the serving container*")[1]
    assert "*tpu-device-busy*" in other and "(pid 4242)" in other


def test_the_demo_logs_agree_with_its_world(world: Demo) -> None:
    """The errors of an earlier container come before the running one started and are labelled so; the
    preemptions logged since it started are as many as its vLLM counter says, and none is logged in the
    quarter hour before it, when no container served."""
    handlers = Handlers(world)
    text = handlers.run("logs analyze --since 2h")
    known = text.split("*Known failures in the log*")[1].split("*Earlier failures")[0]
    earlier = text.split("*Earlier failures, before the current container started")[1]
    assert "max_model_len (16384 tokens)" in known and "(8192 tokens)" not in known
    assert "max_model_len (8192 tokens)" in earlier.split("*Failures of another")[0]
    counted = re.search(r"preempted by vLLM (\d+)", handlers.run("vllm metrics"))
    assert counted is not None
    started = serving_since(world.scenario, world.gcp.world.start)
    assert started is not None
    logged = [e for e in world.gcp.world.logs if "is preempted by" in json.dumps(e.body)]
    times = [datetime.fromisoformat(e.body["timestamp"]) for e in logged]
    assert sum(at >= started for at in times) == int(counted.group(1))
    assert not [at for at in times if started - timedelta(minutes=15) <= at < started]
