"""The demo console shows messages as they arrive (alerts, results after a Confirm), between console lines,
without waiting for the next keystroke."""

from __future__ import annotations

import threading

from bot.slack.render import text_reply
from sim.console import DEMO_CHANNEL
from sim.demo import ALERTS_CHANNEL, Demo


def test_a_message_arriving_between_lines_is_shown_at_once(demo: Demo) -> None:
    demo.user.run("/tpu help")  # everything so far is shown
    shown: list[str] = []
    arrived = threading.Event()

    def show(lines: list[str]) -> None:
        shown.extend(lines)
        arrived.set()

    stop = threading.Event()
    watcher = threading.Thread(target=demo.user.watch, args=(show, stop), daemon=True)
    watcher.start()
    try:
        demo.bot.runner.slack.post(DEMO_CHANNEL, text_reply(":alarm_clock: gemma4-qr terminates in 15 min"))
        assert arrived.wait(30), "the console did not show the message while no command ran"
        assert shown == [":alarm_clock: gemma4-qr terminates in 15 min"]
        out, _ = demo.user.run("/tpu help")  # a running line prints its own answer; the watcher stays quiet
        assert out and shown == [":alarm_clock: gemma4-qr terminates in 15 min"]
    finally:
        stop.set()
        watcher.join(5)


def test_click_takes_the_newest_button_still_shown(demo: Demo) -> None:
    """A button whose message was replaced by the answer to its click is used: a later `click` does not
    reach back to it (a refused command that offered no button gets "no button")."""
    offer = "\n".join(demo.user.run("/tpu delete gemma4-old")[0])
    assert "[Confirm (expires in 5m)] [Cancel]" in offer
    cancelled, answered = demo.user.run("click Cancel")
    assert answered and "clicked 'Cancel'" in cancelled[0]
    again, answered = demo.user.run("click Confirm")
    assert not answered and again == ["(no button labelled 'Confirm' in the conversation)"]
    assert "already used" not in "\n".join(again)


def test_a_message_posted_elsewhere_is_labelled_with_its_channel(demo: Demo) -> None:
    demo.user.run("/tpu help")
    slack = demo.bot.runner.slack
    slack.post(ALERTS_CHANNEL, text_reply(":red_circle: gemma4-qr: vLLM down"))
    out, answered = demo.user.run("/tpu help")
    assert answered and "[#C0ALERTS01] :red_circle: gemma4-qr: vLLM down" in out
    assert out[-1].endswith("Deployment `production`")  # the line's own answer is not taken over
    slack.post(ALERTS_CHANNEL, text_reply(":large_green_circle: gemma4-qr: vLLM serving"))
    demo.slack.wait_for(lambda m: "vLLM serving" in m.text, 10)
    assert demo.user.arrived() == ["[#C0ALERTS01] :large_green_circle: gemma4-qr: vLLM serving"]
    slack.post(DEMO_CHANNEL, text_reply(":alarm_clock: in the console's own channel"))
    demo.slack.wait_for(lambda m: "own channel" in m.text, 10)
    assert demo.user.arrived() == [":alarm_clock: in the console's own channel"]
