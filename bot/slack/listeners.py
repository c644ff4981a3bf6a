"""Bolt listeners: each parses what Slack sent, acks within Slack's 3 s, and hands the work to the runner.
`register` wires them all onto a Bolt app, one kind of request at a time:

- slash commands (`/tpu ...`, `/vllm ...`, one per registry group), run once per `trigger_id`;
- @mentions: the same words, usable inside threads, or a question for Gemma;
- button clicks: Confirm / Cancel of a change, Cancel of a running operation, Review of a suggested command,
  Helpful / Not helpful under a Gemma answer;
- alert buttons: Delete now, Snooze 1 h, Acknowledge, Recover, Keep for N hours;
- modal submissions: the Hugging Face token form;
- the App Home tab, rebuilt each time a user opens it;
- what no listener handles: an unknown slash command, any other request Bolt would log a code hint for.

Every click is acked at once; the runner checks the clicker's role again before anything happens.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shlex
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from slack_bolt import Ack, App
from slack_bolt.error import BoltUnhandledRequestError

from bot.commands.registry import (
    DEPLOYMENT_FLAG,
    Invocation,
    NotACommand,
    Registry,
    UsageError,
    echo,
    normalize,
    resource_name,
    timestamp,
    zone_name,
)
from bot.commands.runner import Origin, Runner
from bot.handlers.admin import store_token, token_problem
from bot.oncall.scheduler import AlertScheduler, parse_key
from bot.slack.gateway import SlackDeliveryError
from bot.slack.render import Block, Reply, context, divider, error_reply, header, mention, section, text_reply
from bot.views.admin import SECRET_FORM_ID
from ops.errors import PermissionDenied
from ops.store.state import Store
from ops.times import rfc3339

log = logging.getLogger(__name__)

REPLAYED = "This command was already received (same trigger_id): it runs once."


def register(app: App, registry: Registry, runner: Runner, alerts: AlertScheduler | None) -> None:
    """Register every listener on `app`: one slash command per registry group, @mentions, button clicks,
    the alert buttons (when `alerts` runs), modals, App Home, then the answer to unknown commands and the
    handler of unhandled requests (last: Bolt tries listeners in registration order, and the unknown-command
    listener matches any command)."""
    _register_commands(app, registry, runner)
    _register_mentions(app, registry, runner)
    _register_buttons(app, registry, runner)
    if alerts is not None:
        register_alert_buttons(app, registry, runner, alerts)
    _register_token_form(app, runner)
    _register_home(app, registry, runner, alerts)
    _register_unhandled(app)


class SeenEvents:
    """Event ids already handled, so a retried delivery (Slack retries when it did not get our 200 in
    time, with the same `event_id` and an `X-Slack-Retry-Num` header) or a duplicate is not answered twice.

    Without a store: in memory, bounded (the oldest ids are forgotten); right for a single process. With a
    store: in its processed-events table (`Store.first_time_event`), so replicas sharing the database
    dedupe each other's events; ids older than `keep` are pruned every `prune_every` new events. If the
    database fails, the in-memory set decides (better a rare duplicate than a dropped request).
    """

    def __init__(
        self,
        limit: int = 10_000,
        *,
        store: Store | None = None,
        now: Callable[[], datetime] | None = None,
        keep: timedelta = timedelta(days=1),
        prune_every: int = 1000,
    ) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()
        self._store = store
        self._now = now or (lambda: datetime.now(UTC))
        self._keep = keep
        self._prune_every = prune_every
        self._added = 0

    def first_time(self, event_id: str) -> bool:
        if self._store is not None and event_id:
            try:
                return self._first_time_in_store(self._store, event_id)
            except Exception:
                log.exception("could not check event %s in the state store; deciding in memory", event_id)
        with self._lock:
            if event_id in self._ids:
                return False
            self._ids[event_id] = None
            if len(self._ids) > self._limit:
                self._ids.popitem(last=False)
            return True

    def _first_time_in_store(self, store: Store, event_id: str) -> bool:
        now = self._now()
        first = store.first_time_event(event_id, now)
        if first:
            with self._lock:
                self._added += 1
                prune = self._added % self._prune_every == 0
            if prune:
                store.forget_events(now - self._keep)
        return first


# Slash commands. Bad input is answered in the ack itself (an ephemeral usage line); nothing else happens
# for it. A slash command runs once: Slack gives each invocation its own `trigger_id`, and a signed request
# is valid for five minutes, so a request replayed in that time (same body, same signature) is recognised by
# its trigger id and only acked. The ack checks the ids this process has seen (memory only: a write to the
# state database on the ack path made every ack of a burst queue for the database's write lock); the worker
# then claims the id in the state store (`SeenEvents`, like event ids) before running the command, so of
# replicas sharing the database only the first runs it.


def _register_commands(app: App, registry: Registry, runner: Runner) -> None:
    seen_here = SeenEvents()
    claimed = SeenEvents(store=runner.services.store, now=runner.services.now)
    # Case-insensitive, like the words after it: `/TPU LIST` is `/tpu list`, not Bolt's "unhandled" hint.
    # (Bolt matches a command name with a Python `re.Pattern` only; the name is one short word.)
    for group in registry.groups():
        listener = _command_listener(group, registry, runner, seen_here, claimed)
        app.command(re.compile(f"^/{re.escape(group)}$", re.IGNORECASE))(listener)


def _command_listener(
    group: str, registry: Registry, runner: Runner, seen_here: SeenEvents, claimed: SeenEvents
) -> Any:
    def on_command(ack: Ack, command: dict[str, Any]) -> None:
        trigger_id = command.get("trigger_id")
        key = _seen_key(trigger_id) if isinstance(trigger_id, str) and trigger_id else None
        if key is not None and not seen_here.first_time(key):
            ack(text=REPLAYED)
            return
        raw = command.get("text")
        typed = raw if isinstance(raw, str) else ""
        try:
            invocation = registry.parse(f"{group} {typed}")
        except UsageError as exc:
            ack(text=str(exc))
            return
        ack(text=f":hourglass_flowing_sand: `{echo(f'/{group} {typed.strip()}'.strip())}` …")
        origin = Origin(
            user_id=command.get("user_id", ""),
            channel_id=command.get("channel_id", ""),
            response_url=command.get("response_url"),
            trigger_id=command.get("trigger_id"),
        )
        if invocation.command.opens_form:  # views.open must beat the trigger_id's 3 s, not queue for a worker
            if key is None or claimed.first_time(key):
                runner.run_now(invocation, origin)
            return
        runner.submit(invocation, origin, first=None if key is None else lambda: claimed.first_time(key))

    on_command.__name__ = f"on_{group}_command"
    return on_command


def _seen_key(trigger_id: str) -> str:
    """The processed-events key of a slash command: its trigger id (a digest when longer than the column)."""
    if len(trigger_id) > 100:
        trigger_id = hashlib.sha256(trigger_id.encode()).hexdigest()
    return f"slash:{trigger_id}"


# @mentions: the same words as the slash commands, usable inside threads (slash commands are not). A mention
# is a command only when it parses as one, or is a typo of one ("tpu lst", "--zon"); anything else, words
# that merely start with a command word included ("vllm has been starting for 45 minutes, is it stuck?"), is
# a question for Gemma (`gemma chat`).


def _register_mentions(app: App, registry: Registry, runner: Runner) -> None:
    services = runner.services
    seen = SeenEvents(store=services.store, now=services.now)

    def on_mention(body: dict[str, Any], event: dict[str, Any]) -> None:
        if not seen.first_time(str(body.get("event_id") or "")):
            return
        origin = Origin(
            user_id=event.get("user", ""),
            channel_id=event.get("channel", ""),
            thread_ts=event.get("thread_ts") or event.get("ts"),
            message_ts=event.get("ts"),
        )
        text = event.get("text")
        typed = text if isinstance(text, str) else ""
        try:
            invocation = registry.parse(typed)
        except UsageError as exc:
            question = normalize(typed)
            if not question or not _is_question(question, exc, registry):
                runner.deliver(text_reply(str(exc)), origin)
                return
            # Not a command: a question for Gemma, answered with the thread as context.
            try:
                invocation = registry.parse(f"gemma chat {shlex.quote(question)}")
            except UsageError as again:  # e.g. too long for a question as well
                runner.deliver(text_reply(str(again)), origin)
                return
        runner.submit(invocation, origin)

    app.event("app_mention")(on_mention)


def _is_question(text: str, error: UsageError, registry: Registry) -> bool:
    """Whether a mention that did not parse is a question rather than a mistyped command: it does not read
    as a command line at all (`NotACommand`), it asks ("?"), or it does not split like one and does not
    start with a command word ("what's the bill" has an odd quote)."""
    first = text.split()[0].lstrip("/").lower()
    return isinstance(error, NotACommand) or "?" in text or first not in {*registry.groups(), "help"}


def _click_origin(body: dict[str, Any], *, on_alert: bool) -> Origin:
    """Where the answer to a button click goes. A click on a change's or an answer's button replaces the
    message it was on, in its thread; a click on an alert leaves the alert standing and shows a refusal or
    error only to the clicker (the channel sees only what was done)."""
    container = body.get("container") or {}
    channel = (body.get("channel") or {}).get("id") or container.get("channel_id", "")
    user_id, response_url = (body.get("user") or {}).get("id", ""), body.get("response_url")
    if on_alert:
        return Origin(user_id, channel, response_url, ephemeral_errors=True)
    return Origin(user_id, channel, response_url, thread_ts=container.get("thread_ts"), replace=True)


def _value(action: dict[str, Any]) -> str:
    return str(action.get("value") or "")


def _register_buttons(app: App, registry: Registry, runner: Runner) -> None:
    """Confirm / Cancel of a pending change, Cancel of a running operation, "Review" of a command Gemma
    suggested (which then goes through the usual role check and confirmation), and Helpful / Not helpful
    under a Gemma answer (which run `/gemma rate`)."""

    def on_confirm(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        runner.confirm(_value(action), _click_origin(body, on_alert=False))

    def on_cancel_change(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        runner.cancel_change(_value(action), _click_origin(body, on_alert=False))

    def on_cancel_operation(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        runner.cancel_operation(_value(action), _click_origin(body, on_alert=False))

    def on_run_suggested(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        origin = _click_origin(body, on_alert=False)
        try:
            invocation = registry.parse(_value(action))
        except UsageError as exc:
            runner.deliver(
                error_reply(exc.problem or "that command no longer parses"), origin, ephemeral=True
            )
            return
        runner.submit(
            invocation, Origin(origin.user_id, origin.channel_id, origin.response_url, origin.thread_ts)
        )

    app.action("confirm_change")(on_confirm)
    app.action("run_suggested")(on_run_suggested)
    # Helpful / Not helpful under a Gemma answer: their value is a `gemma rate ID VERDICT` command line
    app.action("rate_helpful")(on_run_suggested)
    app.action("rate_not_helpful")(on_run_suggested)
    app.action("cancel_change")(on_cancel_change)
    app.action("cancel_operation")(on_cancel_operation)


def register_alert_buttons(app: App, registry: Registry, runner: Runner, scheduler: AlertScheduler) -> None:
    """Register the alert buttons' listeners on `app`: `alert_delete`, `alert_snooze`, `alert_ack` (each
    value carries the alert key), `alert_recover` and `alert_recover_search` (value "zone/name") and
    `alert_keep` (value: the hours).

    Delete now, Snooze, Recover and Keep go through the runner like typed commands (`tpu delete NAME --zone Z
    --force --created T`, `alerts mute NAME 1h`, `tpu recover NAME --zone Z [--search]`, `alerts mute idle
    Nh`), so the clicker's role is checked and destructive ones ask for confirmation with their Confirm
    button. The Delete key pins the resource the alert was about (zone, name, create time): a resource
    deleted and recreated under the same name since is refused. Acknowledge marks the alert in the ledger
    and needs the role of `alerts mute` (it silences the alert too). Each acts on, and checks the clicker's
    role in, the deployment the alert belongs to (the one whose ledger recorded its key; for Recover the one
    whose primary it is), wherever the alert was posted. A crafted or stale value gets a one-line reply,
    never silence; refusals and errors are shown only to the clicker (ephemeral), never to the channel.
    """

    def on(invocation: Invocation, watcher: AlertScheduler | None) -> Invocation:
        """`invocation` pinned to the deployment of `watcher` when `scheduler` watches several (None: left
        to the channel, as typed). The flag is written into the command's text, which a confirmation stores
        and parses again on the click."""
        if watcher is None or len(scheduler.watchers) < 2:
            return invocation
        return registry.parse(f"{invocation.text} {DEPLOYMENT_FLAG} {watcher.deployment}")

    def on_delete(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        origin = _click_origin(body, on_alert=True)
        try:
            zone, name, created = parse_key(_value(action))
            zone, name = zone_name(zone), resource_name(name)
            pinned = rfc3339(timestamp(created))
        except ValueError:
            runner.deliver(
                error_reply("this button does not name a queued resource", "use /tpu delete NAME"),
                origin,
                ephemeral=True,
            )
            return
        invocation = registry.parse(f"tpu delete {name} --zone {zone} --force --created {pinned}")
        runner.submit(on(invocation, scheduler.owner_of(_value(action))), origin)

    def on_snooze(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        origin = _click_origin(body, on_alert=True)
        try:
            _, name, _ = parse_key(_value(action))
            name = resource_name(name)
        except ValueError:
            runner.deliver(error_reply("this alert cannot be snoozed"), origin, ephemeral=True)
            return
        mute = registry.parse(f"alerts mute {name} 1h")
        runner.submit(on(mute, scheduler.owner_of(_value(action))), origin)

    def on_ack(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        origin = _click_origin(body, on_alert=True)
        owner = scheduler.owner_of(_value(action))
        try:
            runner.check_role(origin.user_id, "alerts mute", owner.deployment if owner else None)
        except PermissionDenied as exc:
            message = exc.message.replace("`alerts mute`", "acknowledging an alert")
            runner.deliver(error_reply(message, exc.hint), origin, ephemeral=True)
            return
        row = (owner or scheduler).ledger.acknowledge(_value(action), origin.user_id)
        if row is None:
            runner.deliver(error_reply("this alert is unknown"), origin, ephemeral=True)
            return
        text = f":white_check_mark: Acknowledged by {mention(origin.user_id)}: {row.text}"
        runner.deliver(Reply(text=text, blocks=[section(text)]), origin)

    def on_recover(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        origin = _click_origin(body, on_alert=True)
        zone, _, name = _value(action).partition("/")
        search = " --search" if action.get("action_id") == "alert_recover_search" else ""
        try:
            invocation = registry.parse(f"tpu recover {name} --zone {zone}{search}")
        except UsageError:
            runner.deliver(error_reply("this alert names no queued resource"), origin, ephemeral=True)
            return
        runner.submit(on(invocation, scheduler.watcher_of(zone, name)), origin)

    def on_keep(ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        ack()
        origin = _click_origin(body, on_alert=True)
        hours, _, key = _value(action).partition(" ")
        if not hours.isdigit():
            runner.deliver(error_reply("this button carries no duration"), origin, ephemeral=True)
            return
        keep = registry.parse(f"alerts mute idle {hours}h")
        runner.submit(on(keep, scheduler.owner_of(key)), origin)

    app.action("alert_delete")(on_delete)
    app.action("alert_recover")(on_recover)
    app.action("alert_recover_search")(on_recover)
    app.action("alert_keep")(on_keep)
    app.action("alert_snooze")(on_snooze)
    app.action("alert_ack")(on_ack)


def _register_token_form(app: App, runner: Runner) -> None:
    """The submission of the Hugging Face token form (`view_submission`). The shape is checked in the ack
    (errors show in the form); the admin role is checked again before the token is stored. The token is
    never logged: only its form field is read, and only the store sees it."""

    def on_token(ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        values = (view.get("state") or {}).get("values") or {}
        token = str(((values.get("token") or {}).get("value") or {}).get("value") or "")
        problem = token_problem(token)
        if problem:
            ack(response_action="errors", errors={"token": problem})
            return
        ack()
        channel_id, _, deployment = str(view.get("private_metadata", "")).partition(" ")
        origin = Origin(user_id=(body.get("user") or {}).get("id", ""), channel_id=channel_id)
        runner.submit_form("tpu token", store_token, {"token": token}, origin, deployment or None)

    app.view(SECRET_FORM_ID)(on_token)


def home_blocks(
    runner: Runner, registry: Registry, user_id: str, alerts: AlertScheduler | None
) -> list[Block]:
    """The App Home tab's blocks for `user_id`: the status dashboard (the same data as `/tpu status`, or
    `/fleet` when there are several deployments), then open alerts, per watched deployment when there are
    several (the gateway escapes, redacts and fits them to a view's 100 blocks)."""
    dashboard = "fleet" if len(runner.fleet.services) > 1 else "tpu status"
    status = runner.run_read_only(registry.parse(dashboard), user_id)
    blocks = list(status.blocks)
    blocks.append(divider())
    blocks.append(header("Open alerts"))
    if alerts is None:
        blocks.append(section("Alerts are off (set ALERT_CHANNEL)."))
    elif not _may_read_alerts(runner, user_id):
        blocks.append(section("Alerts are shown to members with the viewer role."))
    else:
        now = runner.services.now()
        watchers = alerts.watchers
        for name, watcher in watchers.items():  # each from its own deployment's ledger
            lines = watcher.open_summary(now)
            title = f"*{name}*\n" if len(watchers) > 1 else ""
            blocks.append(section(title + ("\n".join(lines[:30]) or "No open alerts.")))
    blocks.append(context("Refreshed when you open this tab."))
    return blocks


def _may_read_alerts(runner: Runner, user_id: str) -> bool:
    """True when `user_id` holds the role `/alerts list` needs (the Home tab shows the same)."""
    try:
        runner.check_role(user_id, "alerts list")
    except PermissionDenied:
        return False
    return True


def _register_home(app: App, registry: Registry, runner: Runner, alerts: AlertScheduler | None) -> None:
    """App Home: rebuilt each time a user opens the tab (`app_home_opened`, then `views.publish`), on a
    background thread (the event is acked at once)."""

    def on_home_opened(event: dict[str, Any]) -> None:
        user_id = str(event.get("user") or "")
        if event.get("tab", "home") != "home" or not user_id:
            return

        def publish() -> None:
            try:
                runner.slack.publish_home(user_id, home_blocks(runner, registry, user_id, alerts))
            except SlackDeliveryError as exc:
                log.warning("App Home of %s not published: %s", user_id, exc.reason)

        runner.background(publish)

    app.event("app_home_opened")(on_home_opened)


# What the bot answers and logs for a Slack request no listener handles, instead of Bolt's defaults. A
# workspace sends only the slash commands its app configuration lists (the manifest), but an app configured
# from an older manifest can still send one the bot no longer has. Bolt would answer it HTTP 404 (the user
# sees "failed with the error dispatch_failed") and log, at WARNING, a Python snippet suggesting
# `@app.command("/foo")` to the developer. Here an unknown command gets a one-line ephemeral answer, and any
# other unhandled request (an event or a button the bot does not listen to) a one-line INFO log; listener
# errors are logged as Bolt's default handler logs them (`slack_bolt/listener/listener_error_handler.py`).


def _register_unhandled(app: App) -> None:
    """Answer unknown slash commands and log unhandled requests briefly. Registered after every other
    command listener (this one matches any command); the App must be built with
    `raise_error_for_unhandled_request=True` so that unhandled requests reach `on_error` instead of Bolt's
    warning."""
    app.command(re.compile(r"^/"))(on_unknown_command)
    app.error(on_error)


def on_unknown_command(ack: Ack, command: dict[str, Any]) -> None:
    """Ack an unknown slash command with a short ephemeral line pointing at `/tpu help`."""
    name = echo(str(command.get("command") or "?"))
    log.info("unknown slash command %s from %s", name, command.get("user_id"))
    ack(text=f"`{name}` is not a command of this bot; try `/tpu help`.")


def on_error(error: Exception, body: dict[str, Any]) -> None:
    """Bolt's error handler: one INFO line for an unhandled request (Bolt answers it HTTP 404), the
    traceback for a listener that raised."""
    if isinstance(error, BoltUnhandledRequestError):
        log.info("no listener for a Slack request (%s); answered HTTP 404", describe(body))
        return
    log.error("a Slack listener failed on %s: %s", describe(body), error, exc_info=error)


def describe(body: dict[str, Any]) -> str:
    """A short name of a Slack request body: the slash command, event type, action id, or payload type."""
    event = body.get("event")
    event = event if isinstance(event, dict) else {}
    actions = body.get("actions") if isinstance(body.get("actions"), list) else []
    action = actions[0].get("action_id") if actions and isinstance(actions[0], dict) else None
    kind = body.get("command") or event.get("type") or action or body.get("type") or "unknown"
    return str(kind)[:80]
