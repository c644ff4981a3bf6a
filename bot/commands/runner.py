"""Runs commands on the bot's own worker pool after the ack, and delivers the outcome to Slack.

The Slack listener only parses and acks (well inside the 3 s window); the command itself runs here. Every
outcome reaches the user: the reply, a one-line `OpsError` with its hint, or for an unexpected exception a
short message with a reference id (the traceback stays in the bot's log). Replies leave through
`bot.slack.gateway.SlackGateway` (escaping, redaction, limits, delivery fallbacks, retries after 429).

Access control lives here, not in handlers: the caller's role is checked before anything runs; a command
that changes infrastructure first answers with what it will do and a Confirm button, and on the click the
clicker's role is checked again and the confirmation is consumed (once, before it expires). Every command,
confirmation, refusal and result goes to the audit trail (state store and a log line).

Fair under load: a command that asks the model (`Command.asks_model`, e.g. a chat question, tens of seconds)
runs on a pool of its own (`MODEL_THREADS`), so reads such as `/tpu status` never wait behind model calls;
one user may have at most `MODEL_QUESTIONS_PER_USER` such questions running or queued, and another one is
answered at once with a refusal saying so.
"""

from __future__ import annotations

import logging
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from slack_sdk.errors import SlackApiError

from bot.commands.context import Context, Progress
from bot.commands.registry import Command, Invocation, Registry, Role, UsageError
from bot.commands.workers import ACKS, prestart
from bot.config import Settings
from bot.observability import Metrics
from bot.services import DEFAULT, Fleet, Services
from bot.slack.gateway import Destination, SlackGateway
from bot.slack.membership import guidance
from bot.slack.render import (
    Reply,
    confirm_buttons,
    context,
    error_reply,
    human_duration,
    mention,
    section,
)
from llm.redact import redact
from ops.errors import BadInput, OpsError, PermissionDenied
from ops.store.state import AuditEntry, ConfirmationRefused

log = logging.getLogger(__name__)

AUDIT_OUTCOME_CHARS = 200
"""An audit line's outcome is kept to this many characters (the column's size); a longer one ends in "…"."""
RECENT_WINDOW = timedelta(hours=2)
"""How far back a question's conversation is read for the commands run in it (`Context.recent_commands`)."""


def _fleet_wide(invocation: Invocation) -> bool:
    """Whether the answer is about every deployment (`/fleet`, `/tpu cost --today|--week`), not one."""
    words, args = invocation.command.words, invocation.args
    return words == ("fleet",) or (words == ("tpu", "cost") and bool(args.get("today") or args.get("week")))


@dataclass(frozen=True)
class Origin:
    """Where a request came from and where its answer goes.

    A slash command answers through its `response_url`; a mention answers in the thread `thread_ts`; a
    button click replaces the message it was on through the click's `response_url` (`replace=True`).
    With `ephemeral_errors` (a click on an alert) a refusal or error is shown only to the clicker.
    """

    user_id: str
    channel_id: str
    response_url: str | None = None
    thread_ts: str | None = None
    replace: bool = False
    trigger_id: str | None = None
    ephemeral_errors: bool = False
    message_ts: str | None = None  # a mention's own ts (left out of its thread's history)


@dataclass
class _Running:
    invocation: Invocation
    cancelled: threading.Event
    requested_by: str


GROUP_CACHE_S = 300.0
"""How long a user group's members are kept before `usergroups.users.list` is asked again, seconds."""


class Authorizer:
    """Who may run what: resolves a Slack user's role from settings and checks it against a command's.

    `VIEWERS`, `OPERATORS` and `ADMINS` hold Slack user ids (U..., W...) and user-group ids (S...). Each role
    includes the ones below it. An empty `VIEWERS` means every member of the workspace may read. Group
    membership is read with `usergroups.users.list` and cached for GROUP_CACHE_S.
    """

    def __init__(
        self, settings: Settings, slack: SlackGateway, *, clock: Callable[[], float] = time.monotonic
    ):
        self._lists: list[tuple[Role, Sequence[str]]] = [
            (Role.ADMIN, settings.admins),
            (Role.OPERATOR, settings.operators),
            (Role.VIEWER, settings.viewers),
        ]
        self._everyone_views = not settings.viewers
        self._slack = slack
        self._clock = clock
        self._lock = threading.Lock()
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}

    def role_of(self, user_id: str) -> Role | None:
        """The highest role `user_id` holds, or None if they hold none."""
        for role, principals in self._lists:
            if user_id in principals or any(
                user_id in self._members(p) for p in principals if p.startswith("S")
            ):
                return role
        return Role.VIEWER if self._everyone_views else None

    def check(self, user_id: str, command: Command) -> None:
        """Raise PermissionDenied unless `user_id` holds the role `command` needs."""
        role = self.role_of(user_id)
        if role is None or role < command.role:
            needed = command.role.name.lower()
            raise PermissionDenied(
                f"`{command.name}` needs the {needed} role",
                f"ask an admin to add you to {needed.upper()}S",
            )

    def _members(self, group_id: str) -> frozenset[str]:
        with self._lock:
            cached = self._groups.get(group_id)
        if cached and self._clock() - cached[0] < GROUP_CACHE_S:
            return cached[1]
        try:
            users = self._slack.usergroup_members(group_id)
        except SlackApiError as exc:
            log.warning("cannot read user group %s: %s", group_id, exc.response.get("error"))
            return cached[1] if cached else frozenset()
        members = frozenset(users)
        with self._lock:
            self._groups[group_id] = (self._clock(), members)
        return members


class Runner:
    """The worker pool. `submit`, `confirm`, `cancel_change` and `cancel_operation` return at once."""

    def __init__(
        self,
        services: Services,
        registry: Registry,
        slack: SlackGateway,
        authorizer: Authorizer,
        metrics: Metrics | None = None,
        fleet: Fleet | None = None,
    ):
        self._services = services
        # Several deployments: each has its Services and its roles; one deployment is `default`.
        self.fleet = fleet if fleet is not None else Fleet({DEFAULT: services})
        self._authorizer = authorizer  # the first deployment's roles (alert buttons, App Home)
        self._authorizers = {
            name: authorizer if deployment is services else Authorizer(deployment.settings, slack)
            for name, deployment in self.fleet.services.items()
        }
        self.metrics = metrics if metrics is not None else Metrics()
        self._registry = registry
        self.slack = slack
        self._pool = ThreadPoolExecutor(
            max_workers=services.settings.worker_threads, thread_name_prefix="command"
        )
        self._model_pool = ThreadPoolExecutor(
            max_workers=services.settings.model_threads, thread_name_prefix="model"
        )
        self._running: dict[str, _Running] = {}
        self._running_lock = threading.Lock()
        self._questions: dict[str, int] = {}  # user id -> model questions running or queued
        self._questions_lock = threading.Lock()

    def submit(self, invocation: Invocation, origin: Origin, first: Callable[[], bool] | None = None) -> None:
        """Run a request after the ack: a command that asks the model on the model pool (within the
        caller's limit of questions), any other on the main pool. Returns at once.

        Args:
            invocation, origin: the parsed command and who asked where.
            first: called on the worker before the command runs; False means the request was taken
                already (a replica sharing the state database claimed its trigger id), so it is dropped
                unanswered here (the replica that took it answers). None: always run.
        """
        try:
            if invocation.command.asks_model:
                self._submit_question(invocation, origin, first)
            else:
                self._pool.submit(self._queued, self._if_first, first, self._request, invocation, origin)
        except RuntimeError:  # the pool is shut down: the bot is stopping
            log.warning("stopping: %r from %s not run", invocation.text, origin.user_id)

    def _if_first(
        self, first: Callable[[], bool] | None, flow: Callable[..., None], invocation: Invocation, *args: Any
    ) -> None:
        """`flow(invocation, *args)`, unless `first` says another replica took the request."""
        if first is not None and not first():
            log.info("%r was taken by another replica; not run here", invocation.text)
            return
        flow(invocation, *args)

    def _submit_question(
        self, invocation: Invocation, origin: Origin, first: Callable[[], bool] | None = None
    ) -> None:
        """Queue a model question on the model pool, counted against its user until it ends (in `finally`,
        so also on an error); over the limit, the refusal is delivered from the main pool instead.

        Raises:
            RuntimeError: a pool is shut down (the count is given back first).
        """
        limit = self._services.settings.model_questions_per_user
        user = origin.user_id
        with self._questions_lock:
            pending = self._questions.get(user, 0)
            if pending < limit:
                self._questions[user] = pending + 1
        if pending >= limit:
            self._pool.submit(
                self._queued, self._if_first, first, self._refuse_question, invocation, origin, pending
            )
            return

        def question() -> None:
            try:
                self._queued(self._if_first, first, self._request, invocation, origin)
            finally:
                self._release_question(user)

        try:
            self._model_pool.submit(question)
        except RuntimeError:
            self._release_question(user)
            raise

    def _release_question(self, user: str) -> None:
        with self._questions_lock:
            left = self._questions.get(user, 1) - 1
            if left > 0:
                self._questions[user] = left
            else:
                self._questions.pop(user, None)

    def _refuse_question(self, invocation: Invocation, origin: Origin, pending: int) -> None:
        """Answer a question over the caller's limit: how many of theirs are being answered, and to wait."""
        questions = "question" if pending == 1 else "questions"
        message = f"you have {pending} {questions} for the model being answered already"
        self._audit(origin, "refuse", invocation.text, message)
        self.metrics.command_finished(invocation.command.name, "limited")
        hint = "wait for one to finish, then ask again"
        self.deliver(error_reply(message, hint), origin, ephemeral=origin.ephemeral_errors)

    def confirm(self, token: str, origin: Origin) -> None:
        """A Confirm click: re-authorize the clicker, consume the confirmation, run the change."""
        self._pool.submit(self._queued, self._confirm, token, origin)

    def cancel_change(self, token: str, origin: Origin) -> None:
        """A Cancel click on a pending change."""
        self._pool.submit(self._queued, self._cancel_change, token, origin)

    def submit_form(
        self,
        command_name: str,
        func: object,
        args: dict[str, Any],
        origin: Origin,
        deployment: str | None = None,
    ) -> None:
        """A modal submission for `command_name`: run `func(ctx, **args)` under that command's role, on
        `deployment` (the one the form was opened for; None: chosen by the channel as usual).

        The audit line names the command, never the submitted values.
        """
        command = next(c for c in self._registry.commands() if c.name == command_name)
        text = f"{command_name} (form submitted)"
        invocation = Invocation(replace(command, func=func), args, text, deployment)  # type: ignore[arg-type]
        self._pool.submit(self._queued, self._request, invocation, origin)

    def cancel_operation(self, operation_id: str, origin: Origin) -> None:
        """A Cancel click on a running operation: sets its cancel event if the clicker holds its role."""
        self._pool.submit(self._queued, self._cancel_operation, operation_id, origin)

    @property
    def services(self) -> Services:
        return self._services

    def check_role(self, user_id: str, command_name: str, deployment: str | None = None) -> None:
        """Raise PermissionDenied unless `user_id` holds the role of the command `command_name` (e.g. a
        button that acts like that command: Acknowledge like `alerts mute`, App Home like `tpu status`)
        in `deployment`'s roles (None or an unknown name: the first deployment's)."""
        command = next(c for c in self._registry.commands() if c.name == command_name)
        self._authorizers.get(deployment or "", self._authorizer).check(user_id, command)

    def run_read_only(self, invocation: Invocation, user_id: str, *, for_model: bool = False) -> Reply:
        """Run a read-only command now, for `user_id` (the Home tab, the chat's tools); a refusal or error is
        a one-line reply. `for_model`: the reply is a chat tool's result (`Context.for_model`)."""
        if not invocation.command.read_only:
            return error_reply(f"`{invocation.command.name}` is not read-only", "run it as a command")
        try:
            self._authorizer_of(invocation, Origin(user_id, "")).check(user_id, invocation.command)
        except (PermissionDenied, BadInput) as exc:
            return error_reply(exc.message, exc.hint)
        reply, _ = self._call(invocation, Origin(user_id, ""), invocation.command.func, for_model=for_model)
        return reply

    def run_now(self, invocation: Invocation, origin: Origin) -> None:
        """Run a request on the caller's thread: for a command that opens a modal, which must reach Slack
        within the trigger_id's 3 s (docs.slack.dev/interactivity/handling-user-interaction), so it cannot
        wait for a worker behind other work."""
        self._guard(self._request, invocation, origin)

    def run_unattended(
        self,
        command: str,
        job: Callable[[Context], str],
        origin: Origin,
        *,
        services: Services,
        deployment: str,
        why: str,
    ) -> str:
        """Run a command the bot decided on itself (automatic recovery) now, on the caller's thread, audited
        and redacted like any command: a `command` row whose outcome is `why`, then a `result` row with the
        outcome and the duration. Nobody is asked for a role or a Confirm: the setting that enables the job
        (AUTO_RECOVER) is the consent, and the caller checks the job's own caps first (`refuse_unattended`).

        Args:
            command: the command line the audit trail shows, e.g. "tpu recover NAME --zone Z".
            job: called with a Context of `origin` on `services` (no caller role: nobody asked); returns one
                line saying what it did.
            origin: who acts (a user id of the bot's own, e.g. "auto-recover") and the channel it reports in.
            services: the backends of the deployment acted on; deployment: its name (bot.deployments).
            why: the first row's outcome, e.g. "started: SUSPENDED (by SERVICE)".

        Returns:
            The outcome, redacted (`llm.redact.redact`): the job's line, "failed: MESSAGE" when it raised an
            OpsError, "failed unexpectedly: TYPE" for any other exception (logged with its traceback).
        """
        started = time.monotonic()
        self._audit(origin, "command", command, why)
        try:
            outcome = job(self._context(services, origin, deployment))
        except OpsError as exc:
            outcome = f"failed: {exc.message}"
        except Exception as exc:  # an unexpected failure is reported, never silent
            log.exception("unattended %r failed", redact(command))
            outcome = f"failed unexpectedly: {type(exc).__name__}"
        self._audit(origin, "result", command, outcome, time.monotonic() - started)
        return redact(outcome)

    def refuse_unattended(self, command: str, origin: Origin, refusal: str) -> None:
        """Write down that a command the bot decided on itself was not run, and why (an audit `refuse` row
        with outcome "refused: REFUSAL", redacted like any other)."""
        self._audit(origin, "refuse", command, f"refused: {refusal}")

    def background(self, job: Callable[[], object]) -> None:
        """Run `job` on the worker pool; a crash is logged."""
        self._pool.submit(self._queued, job)

    def warm(self) -> None:
        """Start every worker thread of both pools now, each with its TPU API clients built (see
        `bot.slack.app.warm_up`)."""
        settings, warm_thread = self._services.settings, self._services.tpu.warm_thread
        prestart(self._pool, settings.worker_threads, warm_thread)
        prestart(self._model_pool, settings.model_threads, warm_thread)

    def shutdown(self) -> None:
        """Stop both pools, letting what is queued or running finish."""
        self._model_pool.shutdown(wait=True, cancel_futures=False)
        self._pool.shutdown(wait=True, cancel_futures=False)

    # ---- flows

    def _request(self, invocation: Invocation, origin: Origin) -> None:
        command = invocation.command
        self._audit(origin, "command", invocation.text, "received")
        try:
            self._authorizer_of(invocation, origin).check(origin.user_id, command)
        except (PermissionDenied, BadInput) as exc:
            self._audit(origin, "refuse", invocation.text, exc.message)
            self.metrics.command_finished(command.name, "denied")
            self.deliver(error_reply(exc.message, exc.hint), origin, ephemeral=origin.ephemeral_errors)
            return
        if command.changes_infra:
            self._ask_confirmation(invocation, origin)
            return
        self._execute(invocation, origin)

    def _ask_confirmation(self, invocation: Invocation, origin: Origin) -> None:
        services = self._services
        ttl = timedelta(seconds=services.settings.confirmation_ttl_s)
        command = invocation.command
        if command.preview is not None:
            preview, failed = self._call(invocation, origin, command.preview)
            if failed:
                self._audit(origin, "result", invocation.text, failed)
                self.deliver(preview, origin, ephemeral=origin.ephemeral_errors)
                return
            if preview.nothing_to_confirm:  # e.g. /tpu ensure when all is well: an answer, not a refusal
                self._audit(origin, "result", invocation.text, "nothing to do")
                self.deliver(preview, origin)
                return
        else:
            preview = Reply(text=f"`/{invocation.text}`", blocks=[section(f"`/{invocation.text}`")])
        confirmation = services.store.create_confirmation(
            invocation.text, origin.user_id, origin.channel_id, ttl=ttl, now=services.now(), plan=preview.plan
        )
        note = (
            f"Requested by {mention(origin.user_id)}. Needs the {command.role.name.lower()} role to confirm."
        )
        reply = Reply(
            text=f"Confirm: {preview.text}",
            blocks=[
                section(":warning: *This changes infrastructure.* Review, then confirm:"),
                *preview.blocks,
                context(note),
                confirm_buttons(confirmation.token, invocation.text, expires_in=human_duration(ttl)),
            ],
        )
        self._audit(origin, "confirm-requested", invocation.text, "awaiting confirmation")
        self.deliver(reply, origin)

    def _confirm(self, token: str, origin: Origin) -> None:
        store = self._services.store
        pending = store.get_confirmation(token)
        if pending is None:
            self._refuse_click(origin, "(unknown)", "this confirmation is unknown", "run the command again")
            return
        try:
            invocation = self._registry.parse(pending.command)
            self._authorizer_of(invocation, origin).check(origin.user_id, invocation.command)
            store.consume_confirmation(token, origin.user_id, now=self._services.now())
        except (PermissionDenied, ConfirmationRefused, BadInput) as exc:
            self._refuse_click(origin, pending.command, exc.message, exc.hint)
            return
        except UsageError as exc:
            self._refuse_click(origin, pending.command, exc.problem or "the command no longer parses", "")
            return
        self._audit(origin, "confirm", pending.command, f"confirmed (requested by {pending.requested_by})")
        running = (
            f":hourglass_flowing_sand: Confirmed by {mention(origin.user_id)}: running `/{pending.command}` …"
        )
        self.deliver(Reply(text=running, blocks=[section(running)]), origin)
        self._execute(
            invocation,
            Origin(origin.user_id, origin.channel_id, origin.response_url, replace=True),
            confirmed_plan=pending.plan,
        )

    def _may_cancel(
        self, user_id: str, requested_by: str, command: Command | None, authorizer: Authorizer
    ) -> None:
        """Cancelling needs the command's own role (in `authorizer`, its deployment's roles), or to be the
        one who asked for it.

        Raises:
            PermissionDenied: neither (or the command is unknown and the clicker is not the requester).
        """
        if user_id == requested_by:
            return
        if command is None:
            raise PermissionDenied("only the requester may cancel this", "")
        try:
            authorizer.check(user_id, command)
        except PermissionDenied as exc:
            raise PermissionDenied(
                f"cancelling this needs what running it needs: {exc.message}, or to be its requester",
                exc.hint,
            ) from None

    def _cancel_change(self, token: str, origin: Origin) -> None:
        pending = self._services.store.get_confirmation(token)
        command = pending.command if pending else "(unknown)"
        if pending is None:
            self._refuse_click(origin, command, "this confirmation is unknown", "run the command again")
            return
        parsed: Command | None = None
        authorizer = self._authorizer
        try:
            invocation = self._registry.parse(pending.command)
            parsed, authorizer = invocation.command, self._authorizer_of(invocation, origin)
        except (UsageError, BadInput):
            pass
        try:
            self._may_cancel(origin.user_id, pending.requested_by, parsed, authorizer)
        except PermissionDenied as exc:
            self._refuse_click(origin, command, exc.message, exc.hint)
            return
        try:
            self._services.store.consume_confirmation(token, origin.user_id, now=self._services.now())
        except ConfirmationRefused as exc:
            self._refuse_click(origin, command, exc.message, exc.hint)
            return
        self._audit(origin, "cancel", command, "cancelled before running")
        self.deliver(
            Reply(text=f"Cancelled by {mention(origin.user_id)}: `/{command}` (nothing was changed)."), origin
        )

    def _cancel_operation(self, operation_id: str, origin: Origin) -> None:
        with self._running_lock:
            running = self._running.get(operation_id)
        if running is None:
            self._refuse_click(origin, "(finished)", "that operation is unknown or has already finished", "")
            return
        try:
            self._may_cancel(
                origin.user_id,
                running.requested_by,
                running.invocation.command,
                self._authorizer_of(running.invocation, origin),
            )
        except (PermissionDenied, BadInput) as exc:
            self._refuse_click(origin, running.invocation.text, exc.message, exc.hint)
            return
        self._audit(origin, "cancel", running.invocation.text, "cancel requested")
        running.cancelled.set()

    def _execute(self, invocation: Invocation, origin: Origin, *, confirmed_plan: str = "") -> None:
        started = time.monotonic()
        operation_id = uuid.uuid4().hex
        cancelled = threading.Event()
        progress = Progress(self.slack, origin.channel_id, origin.thread_ts)
        with self._running_lock:
            self._running[operation_id] = _Running(invocation, cancelled, origin.user_id)
        outcome = "exception"  # unless the handler returns
        try:
            reply, failed = self._call(
                invocation,
                origin,
                invocation.command.func,
                progress=progress,
                operation_id=operation_id,
                cancelled=cancelled,
                confirmed_plan=confirmed_plan,
                open_modal=self._modal_opener(origin),
                thread_history=self._history_reader(origin),
                recent_commands=self._recent_reader(origin),
                run_command=lambda other: self.run_read_only(other, origin.user_id, for_model=True),
            )
            outcome = "error" if failed else "ok"
        finally:
            with self._running_lock:
                del self._running[operation_id]
            self.metrics.command_finished(invocation.command.name, outcome)
        self._audit(origin, "result", invocation.text, failed or "ok", time.monotonic() - started)
        filename = invocation.command.name.replace(" ", "-") + ".txt"
        if progress.refused:  # the channel refused the bot: the answer says what was lost and how to fix it
            notice = section(guidance(origin.channel_id, ["progress updates"]))
            reply = replace(reply, blocks=[*reply.blocks, notice])
        narrower = self._narrower(invocation)
        if progress.ts is not None:
            private = reply.ephemeral or (bool(failed) and origin.ephemeral_errors)
            progress.finish(
                replace(reply, ephemeral=private),
                user_id=origin.user_id,
                filename=filename,
                narrower=narrower,
            )
        else:
            self.deliver(
                reply,
                origin,
                ephemeral=bool(failed) and origin.ephemeral_errors,
                filename=filename,
                narrower=narrower,
            )

    def _narrower(self, invocation: Invocation) -> Callable[[float], str | None]:
        """How to ask for a `share` (0-1) of what `invocation` answers, for an answer Slack took only part
        of: the same command line with its `--limit` (else its `--since` window, in whole minutes) scaled by
        `share`, checked to parse (`Registry.parse`). The function returns None when the command has neither
        option typed or the scaled line would not parse."""

        def narrower(share: float) -> str | None:
            words = shlex.split(invocation.text)
            for name in ("limit", "since"):
                param = next((p for p in invocation.command.params if p.name == name and p.flag), None)
                value = invocation.args.get(name)
                if param is None or param.flag not in words[:-1] or value is None:
                    continue
                if isinstance(value, timedelta):
                    minutes = int(value.total_seconds() * share // 60)
                    scaled = f"{minutes}m" if minutes >= 1 else ""
                else:
                    scaled = str(int(value * share)) if int(value * share) >= 1 else ""
                if not scaled:
                    continue
                at = words.index(param.flag) + 1
                line = "/" + shlex.join([*words[:at], scaled, *words[at + 1 :]])
                try:
                    self._registry.parse(line)
                except UsageError:
                    return None
                return line
            return None

        return narrower

    def _modal_opener(self, origin: Origin) -> Callable[[dict[str, Any]], None] | None:
        trigger_id = origin.trigger_id
        if not trigger_id:
            return None

        def open_modal(view: dict[str, Any]) -> None:
            self.slack.open_modal(trigger_id, view)

        return open_modal

    def _history_reader(self, origin: Origin) -> Callable[[], list[dict[str, str]]] | None:
        """Earlier messages of a mention's thread (`conversations.replies`), oldest first, the mention itself
        excluded. Slack pages a thread from its oldest message (`limit`, `cursor`, `has_more`), so every page
        is read (up to HISTORY_PAGES) to reach the newest end; the agent keeps the newest that fit its
        budget. Texts are as last edited (Slack returns the edited text)."""
        thread_ts = origin.thread_ts
        if not thread_ts:
            return None

        def read() -> list[dict[str, str]]:
            messages = self.slack.thread_messages(origin.channel_id, thread_ts)
            if origin.message_ts:  # the mention itself is the question, not history
                messages = [m for m in messages if m.get("ts") != origin.message_ts]
            return [
                {
                    "role": "assistant" if m.get("bot_id") else "user",
                    "content": str(m.get("text") or ""),
                    "user": "" if m.get("bot_id") else str(m.get("user") or ""),
                }
                for m in messages
            ]

        return read

    def _recent_reader(self, origin: Origin) -> Callable[[], list[AuditEntry]]:
        """The audit lines of the request's conversation over the last RECENT_WINDOW, oldest first: in a
        thread, that thread's and the channel's slash commands (which cannot be run in a thread); at the top
        of a channel, every line of the channel. Nothing of another channel."""

        def read() -> list[AuditEntry]:
            in_thread = origin.thread_ts is not None and origin.thread_ts != origin.message_ts
            since = self._services.now() - RECENT_WINDOW
            thread = origin.thread_ts if in_thread else None
            return self._services.store.channel_audit(origin.channel_id, since=since, thread_ts=thread)

        return read

    def _context(self, services: Services, origin: Origin, deployment: str, **fields: Any) -> Context:
        """The Context a job runs with: `origin`'s user and channel on `services` of `deployment`, the fleet,
        and `fields` (the caller's role, a progress message, ...)."""
        return Context(
            services,
            self._registry,
            origin.user_id,
            origin.channel_id,
            fleet=self.fleet,
            deployment=deployment,
            **fields,
        )

    def _call(self, invocation: Invocation, origin: Origin, func: object, **fields: Any) -> tuple[Reply, str]:
        """Call a handler (or a preview). Returns its reply and "" — or, when it raised an OpsError, a
        one-line error reply and the error for the audit trail."""
        started = time.monotonic()
        try:
            deployment, services = self._deployment(invocation, origin)
            authorizer = self._authorizers[deployment]
            ctx = self._context(
                services, origin, deployment, caller_role=lambda: authorizer.role_of(origin.user_id), **fields
            )
            reply: Reply = func(ctx, **invocation.args)  # type: ignore[operator]
            # Backend latency by the command's group (tpu, vllm, gemma, ...); see bot.observability.
            self.metrics.backend_call_finished(invocation.command.words[0], time.monotonic() - started)
            labelled = not _fleet_wide(invocation) and not ctx.for_model  # a chat tool's header names it
            return (self._labelled(reply, deployment) if labelled else reply), ""
        except OpsError as exc:
            backend = exc.backend or invocation.command.words[0]
            self.metrics.backend_call_finished(backend, time.monotonic() - started, failed=bool(exc.backend))
            name = invocation.command.name
            return error_reply(f"`{name}`: {exc.message}", exc.hint), f"error: {exc.message}"

    def _deployment(self, invocation: Invocation, origin: Origin) -> tuple[str, Services]:
        """The deployment the invocation acts on (see `Fleet.choose`); raises BadInput when ambiguous."""
        return self.fleet.choose(
            invocation.deployment, origin.channel_id, changes=invocation.command.changes_infra
        )

    def _authorizer_of(self, invocation: Invocation, origin: Origin) -> Authorizer:
        """The roles of the invocation's deployment (raises BadInput like `_deployment`)."""
        return self._authorizers[self._deployment(invocation, origin)[0]]

    def _labelled(self, reply: Reply, deployment: str) -> Reply:
        """With several deployments, a reply says which one it is about (a last context line)."""
        if len(self.fleet.services) == 1:
            return reply
        note = f"Deployment `{deployment}`"
        return replace(reply, text=f"{reply.text}\n{note}", blocks=[*reply.blocks, context(note)])

    def _queued(self, flow: object, *args: object) -> None:
        """`_guard` on a pool thread, once a burst being acked is answered; its steps pause for later bursts
        (bot.commands.workers.AckGate)."""
        with ACKS.work():
            self._guard(flow, *args)

    def _guard(self, flow: object, *args: object) -> None:
        """Run a flow; nothing escapes silently (a crash is logged and answered)."""
        try:
            flow(*args)  # type: ignore[operator]
        except Exception:
            ref = uuid.uuid4().hex[:8]
            log.exception("request failed (ref %s)", ref)
            origin = next((a for a in args if isinstance(a, Origin)), None)
            if origin is not None:
                self.deliver(
                    error_reply(f"that failed unexpectedly (ref {ref})", "the bot's log has the details"),
                    origin,
                )

    def _refuse_click(self, origin: Origin, command: str, message: str, hint: str) -> None:
        self._audit(origin, "refuse", command, message)
        self.deliver(
            error_reply(message, hint),
            Origin(origin.user_id, origin.channel_id, origin.response_url),
            ephemeral=True,
        )

    def _audit(
        self, origin: Origin, action: str, command: str, outcome: str, duration_s: float | None = None
    ) -> None:
        ACKS.pause()
        # Audit rows and lines never hold secrets (a `/gemma ask` prompt may quote a token).
        command, outcome = redact(command), redact(outcome)
        entry = AuditEntry(
            at=self._services.now(),
            user_id=origin.user_id,
            channel_id=origin.channel_id,
            action=action,
            command=command,
            outcome=outcome
            if len(outcome) <= AUDIT_OUTCOME_CHARS
            else outcome[: AUDIT_OUTCOME_CHARS - 1] + "…",
            duration_s=duration_s,
            thread_ts=origin.thread_ts,
        )
        log.info(
            "audit action=%s user=%s channel=%s command=%r outcome=%r duration_s=%s",
            action, origin.user_id, origin.channel_id, command, outcome,
            "-" if duration_s is None else f"{duration_s:.3f}",
        )  # fmt: skip
        try:
            self._services.store.record(entry)
        except Exception:
            log.exception("could not write the audit entry")

    # ---- delivery

    def deliver(
        self,
        reply: Reply,
        origin: Origin,
        *,
        ephemeral: bool = False,
        filename: str = "answer.txt",
        narrower: Callable[[float], str | None] | None = None,
    ) -> None:
        """Answer where the request came from, through the gateway (every fallback: see bot.slack.gateway);
        `narrower` is the command's way to ask for part of its answer (`Destination.narrower`)."""
        ACKS.pause()
        destination = Destination(
            channel=origin.channel_id,
            user=origin.user_id,
            thread_ts=origin.thread_ts,
            response_url=origin.response_url,
            replace=origin.replace,
            ephemeral=ephemeral or reply.ephemeral,
            narrower=narrower,
        )
        self.slack.deliver(reply, destination, filename=filename)
