"""Slack listeners, one module per kind; `register` wires them all onto a Bolt app."""

from __future__ import annotations

from slack_bolt import App

from bot.commands.registry import Registry
from bot.commands.runner import Runner
from bot.slack.listeners import actions, commands, events, unhandled, views


def register(app: App, registry: Registry, runner: Runner) -> None:
    """Register every listener: one slash command per registry group, @mentions, button clicks, modals,
    then the answer to unknown commands and the handler of unhandled requests
    (`bot.slack.listeners.unhandled`)."""
    commands.register(app, registry, runner)
    events.register(app, registry, runner)
    actions.register(app, registry, runner)
    views.register(app, runner)
    unhandled.register(app)
