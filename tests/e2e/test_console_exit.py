"""The demo console leaves on `quit`, end of input or the end of a script even while a command runs: it
cancels the running operation through the bot's own Cancel button, so a capacity search deletes its
requests and its progress message ends "cancelled"; a script names the lines that got no final answer."""

from __future__ import annotations

from pathlib import Path

from ops.errors import NotFound
from sim.console import stop_running
from sim.demo import Demo
from tests.e2e.demo_script import run_demo_script


def _exists(demo: Demo, name: str) -> bool:
    try:
        demo.bot.services.tpu.get_queued_resource(name, list(demo.settings.tpu_zones))
    except NotFound:
        return False
    return True


def test_leaving_cancels_a_running_search_through_its_cancel_button(demo: Demo) -> None:
    # asia-northeast1-b has no capacity in the demo: the request waits there until cancelled.
    out, answered = demo.user.run("/tpu find gemma4-b --allow-second --zones asia-northeast1-b")
    assert answered and "[Confirm" in "\n".join(out), out
    demo.user.run("click Confirm")
    assert demo.user.running(), "the search should still be waiting for capacity"
    assert demo.slack.wait_for(lambda m: "WAITING_FOR_RESOURCES" in m.text, 30) is not None
    assert _exists(demo, "gemma4-b")

    still = stop_running(demo.user, timeout=30)

    assert still == [] and demo.user.running() == []
    final = [m for m in demo.slack.messages if "Capacity search: gemma4-b" in m.render()][-1]
    assert "Cancelled; every request this search made was deleted." in final.render()
    assert not final.in_progress
    assert not _exists(demo, "gemma4-b")


def test_nothing_running_means_nothing_clicked(demo: Demo) -> None:
    demo.user.run("/tpu help")
    before = len(demo.slack.calls)
    assert stop_running(demo.user) == [] and len(demo.slack.calls) == before


def test_script_exits_naming_the_lines_without_a_final_answer(tmp_path: Path) -> None:
    result = run_demo_script(
        tmp_path,
        "# an unknown command, a click with no button, then a search left running at the end\n"
        "/foo bar\nclick Confirm\n\n"
        "/tpu find gemma4-b --allow-second --zones asia-northeast1-b\nclick Confirm\n/tpu list\n",
    )
    assert result.returncode == 1, result.stderr[-2000:]
    # The click with no button is named; the search's Confirm may be too (still running after 30 s).
    assert "script line(s) got no final answer:\n  line 3: click Confirm\n" in result.stderr
    assert "line 2:" not in result.stderr and "line 7:" not in result.stderr
    assert "`/foo` is not a command of this bot; try `/tpu help`." in result.stdout
    assert "Cancelled; every request this search made was deleted." in result.stdout
    transcript = result.stdout + result.stderr
    assert "Traceback" not in transcript and "@app.command" not in transcript


def test_quit_in_a_script_leaves_as_at_the_console(tmp_path: Path) -> None:
    result = run_demo_script(tmp_path, "/tpu list\nquit\n/tpu status\n")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "you> /tpu list" in result.stdout
    assert "you> quit" not in result.stdout and "you> /tpu status" not in result.stdout
    assert "simulated answer" not in result.stdout  # "quit" was never asked of the model
