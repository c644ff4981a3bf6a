"""Handler tests without the transport.

`Handlers.run("tpu status")` parses the line with the bot's registry and runs it through the bot's Runner
(role check, deployment choice, audit, delivery) on the test's thread, against the demo's simulators: Google
through the real client libraries over REST, the vLLM simulator through openai/httpx, the TPU VM through
paramiko to the SSH simulator. The answer goes out through the Slack gateway to the Slack simulator, where
it is read back. No signed request and no Bolt listener are involved: the e2e tests keep those.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from bot.commands.runner import Origin
from sim.console import DEMO_CHANNEL, DEMO_USER
from sim.demo import Demo


@dataclass(frozen=True)
class Handlers:
    """Runs command lines through the Runner of `world`'s bot."""

    world: Demo

    def run(self, line: str, *, user: str = DEMO_USER, channel: str = DEMO_CHANNEL) -> str:
        """Run `line` (command words and arguments, as typed after the slash) as `user` in `channel`.

        Returns:
            Every message the bot sent meanwhile (progress, answer, files), rendered as the console shows
            them, one after another.

        Raises:
            bot.commands.registry.UsageError: the line does not parse.
        """
        slack = self.world.slack
        start = len(slack.messages)
        invocation = self.world.bot.registry.parse(line)
        self.world.bot.runner.run_now(invocation, Origin(user, channel))
        return "\n".join(m.render() for m in slack.messages[start:] if m.kind != "user")


@pytest.fixture(scope="module")
def handlers(demo: Demo) -> Handlers:
    """Handlers of the module's shared demo world (for tests that change nothing)."""
    return Handlers(demo)
