"""The demo console shows messages as they arrive (alerts, results after a Confirm), between console lines,
without waiting for the next keystroke."""

from __future__ import annotations

import threading

from bot.slack.render import text_reply
from sim.console import DEMO_CHANNEL
from sim.demo import Demo


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
