"""A command whose answer Slack cannot hold in one message, through the Runner: the message is cut once (by
the gateway) and the whole answer is one file, uploaded before the message names it."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from bot.commands.runner import Origin
from sim.console import DEMO_CHANNEL, DEMO_USER
from sim.demo import Demo
from tests.integration.test_gcp_sim import default_scenario

MANY = 80


def _many_resources(path: Path) -> Path:
    """The default world with MANY more ACTIVE queued resources in us-east5-a, each with its node."""
    scenario = copy.deepcopy(default_scenario())
    template = scenario["google"]["queued_resources"][0]
    for index in range(MANY):
        extra = copy.deepcopy(template)
        extra["name"] = f"extra-{index:02d}-qr"
        extra["node"]["id"] = f"extra-{index:02d}-node"
        scenario["google"]["queued_resources"].append(extra)
    path.write_text(yaml.safe_dump(scenario))
    return path


def test_a_cut_answer_is_one_file_uploaded_before_the_message_names_it(tmp_path: Path) -> None:
    with Demo(_many_resources(tmp_path / "many.yaml")) as world:
        start = len(world.slack.messages)
        world.bot.runner.run_now(world.bot.registry.parse("tpu list"), Origin(DEMO_USER, DEMO_CHANNEL))
        sent = [m for m in world.slack.messages[start:] if m.kind != "user"]
    files = [m for m in sent if m.kind == "file"]
    assert [m.filename for m in files] == ["tpu-list.txt"], "one file holds the whole answer"
    whole = files[0].content.decode()
    assert all(f"extra-{index:02d}-qr" in whole for index in range(MANY))
    (answer,) = [m for m in sent if "the whole answer is in `tpu-list.txt`" in m.render()]
    assert sent.index(files[0]) < sent.index(answer)
    assert "extra-79-qr" not in answer.render()  # cut: the rest is in the file
