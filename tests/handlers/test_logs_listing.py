"""`/logs` renders log text as it was written: through the runner against the Google emulator (the real
Logging client), a traceback written one line per entry, a multi-line entry and a long line."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import yaml

from bot.handlers.logs import PROBE_TIMEOUT_S
from bot.views.logs import LINE_CHARS, LISTING_FILE
from sim.demo import Demo
from sim.scenario import load
from tests.handlers.conftest import Handlers

# vLLM's output, one container entry per line as docker's gcplogs driver sends it, oldest first.
TRACEBACK = (
    "ERROR 12-06 07:00:00 [serving_chat.py:200] Error in preprocessing prompt inputs",
    "ERROR 12-06 07:00:00 [serving_chat.py:200] Traceback (most recent call last):",
    'ERROR 12-06 07:00:00 [serving_chat.py:200]   File "/usr/lib/vllm/serving_chat.py", line 183, in create',
    "ERROR 12-06 07:00:00 [serving_chat.py:200]     ) = await self._preprocess_chat(",
    "ValueError: This model's maximum context length is 16384 tokens. However, you requested 20000 tokens.",
)
LONG = "WARNING: " + " ".join(f"word{i:03d}" for i in range(60))  # 488 characters, spaces every 8
MULTILINE = "guest agent report\nfirst detail line\nsecond detail line"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    """The default world whose Cloud Logging holds only the entries above."""
    scenario = load(None)
    logs = scenario["google"]["logs"]
    logs.update(noise={"count": 0}, cases=[], audit=False)
    logs["entries"] = [
        *(
            {"at": f"-{600 - i / 10:.1f}s", "text": line, "payload": "container"}
            for i, line in enumerate(TRACEBACK)
        ),
        {"at": "-300s", "text": LONG, "payload": "container"},
        {"at": "-200s", "severity": "INFO", "text": MULTILINE},
    ]
    path = tmp_path_factory.mktemp("scenario") / "listing.yaml"
    path.write_text(yaml.safe_dump(scenario))
    with Demo(path) as demo:
        yield demo


def test_a_listing_keeps_each_traceback_and_entry_in_its_own_order(world: Demo) -> None:
    text = Handlers(world).run("logs --since 1h")
    assert "*7 entries*, newest first" in text
    listing = text[text.index("```") : text.rindex("```") + 3].splitlines()
    assert listing[0] == "```" and listing[-1] == "```"  # the fences on lines of their own
    body = listing[1:-1]
    # newest entry first: its lines in their order, the continuation lines indented under the message
    assert body[0].endswith(" INFO      gemma4-qr-node guest agent report")
    assert body[1].strip() == "first detail line" and body[2].strip() == "second detail line"
    assert body[1].startswith(" " * 20)
    # then the long line, cut at a word with a mark
    shown = body[3].split(" gemma4-qr-node ", 1)[1]
    assert shown.endswith(" …") and shown.removesuffix(" …").split()[-1].startswith("word")
    assert len(shown) <= LINE_CHARS + 2 and shown.removesuffix(" …") in LONG
    # then the traceback, read top to bottom, its exception last
    assert [line.split(" gemma4-qr-node ", 1)[1] for line in body[4:]] == [*TRACEBACK]


def test_a_cut_line_is_whole_in_the_attached_file(world: Demo) -> None:
    start = len(world.slack.messages)
    text = Handlers(world).run("logs --since 1h")
    assert f"every line is whole in `{LISTING_FILE}`" in text
    files = [m for m in world.slack.messages[start:] if m.kind == "file" and m.filename == LISTING_FILE]
    content = files[-1].content.decode()
    assert LONG in content and MULTILINE.splitlines()[2] in content
    assert content.index(TRACEBACK[0]) < content.index(TRACEBACK[-1])


def test_an_empty_read_of_another_node_says_what_to_try_without_ssh(world: Demo) -> None:
    ran = len(world.host.commands)
    text = Handlers(world).run("logs --node gemma4-other-node --severity ERROR")
    assert "No log entries match: " in text
    assert "Try a longer `--since` (e.g. `--since 6h`), without `--severity`, another `--node`" in text
    assert len(world.host.commands) == ran and "Cloud Logging:" not in text  # nothing asked of the VM


def test_an_empty_read_whose_vm_does_not_answer_says_so_in_one_line(world: Demo) -> None:
    world.host.set_command_delay(30)
    try:
        started = time.monotonic()
        text = Handlers(world).run("logs --since 1m --filter '\"no such text\"'")
        waited = time.monotonic() - started
    finally:
        world.host.set_command_delay(0)
    assert "No log entries match: " in text and "without `--filter`" in text
    (line,) = [line for line in text.splitlines() if "Not checked" in line]
    assert line.startswith(":grey_question: Not checked whether `vllm` logs to Cloud Logging: ")
    assert waited < PROBE_TIMEOUT_S + 5, waited  # the probe's bound, not SSH's 60 s command timeout
