"""Know what you made: ownership labels, creates that survive ambiguous answers, deletes of only what the
bot made, one operation per name, and the reconciliation of creates whose operation ended or died (at
start, and periodically for creates answered ambiguously that may appear after their command ended).

Every queued resource the bot requests carries node labels (`tpu.nodeSpec[0].node.labels`, the only place
a queued resource has labels): `managed-by=tpu-chatops`, the request id, the search id of a capacity
search, and the requesting Slack user. A name proves nothing: a resource is the bot's to delete only when
its request label is the request's own id and its `createTime` is not before the request was sent.

An ambiguous create (timeout, 5xx, lost connection) may or may not have created the resource, so the bot
reads it back before anything else: its own label means it is ours; another label (or none) means it
existed before, or someone else made it, and it is left alone.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from ops.errors import AlreadyExists, BackendTimeout, BackendUnavailable, NotFound, OpsError
from ops.linear import linear
from ops.store.state import InflightRequest, Store
from ops.tpu.api import TpuOps
from ops.tpu.model import CreateSpec, QueuedResourceInfo

__all__ = [
    "MANAGED_BY",
    "MANAGED_BY_KEY",
    "CreateOutcome",
    "NameTaken",
    "create_owned",
    "created_by_bot",
    "delete_owned",
    "hold_operation",
    "label_value",
    "made_by",
    "new_request_id",
    "operation_keys",
    "ownership_labels",
    "reconcile",
    "record_ambiguous",
]

log = logging.getLogger(__name__)

MANAGED_BY_KEY = "managed-by"
MANAGED_BY = "tpu-chatops"
REQUEST_KEY = "tpu-chatops-request"
SEARCH_KEY = "tpu-chatops-search"
USER_KEY = "tpu-chatops-user"
# Clocks of the bot and of Google differ a little; a resource created this long before the request was
# sent still counts as the request's own (the label is the real proof, the time a second check).
CLOCK_SKEW = timedelta(minutes=5)
# Google Cloud label values: lowercase letters, digits, "_" and "-", at most 63 characters
# (https://cloud.google.com/compute/docs/labeling-resources#requirements).
_LABEL_BAD = linear(r"[^a-z0-9_-]")
LABEL_MAX = 63


def new_request_id() -> str:
    """A fresh request id, e.g. "r3f9c0a1b2d4e", valid as a label value."""
    return "r" + secrets.token_hex(6)


def label_value(text: str) -> str:
    """`text` as a Google Cloud label value: lowercased, other characters replaced by "-", <= 63 chars."""
    return _LABEL_BAD.sub("-", text.lower())[:LABEL_MAX]


def ownership_labels(request_id: str, user_id: str, search_id: str | None = None) -> dict[str, str]:
    """The labels the bot puts on what it creates.

    Args:
        request_id: this create's id (see `new_request_id`).
        user_id: the Slack user who asked (stored lowercased: label values are lowercase).
        search_id: the capacity search the create belongs to, if any.

    Returns:
        {"managed-by": "tpu-chatops", "tpu-chatops-request": ..., "tpu-chatops-user": ...[,
        "tpu-chatops-search": ...]}
    """
    labels = {
        MANAGED_BY_KEY: MANAGED_BY,
        REQUEST_KEY: label_value(request_id),
        USER_KEY: label_value(user_id or "unknown"),
    }
    if search_id:
        labels[SEARCH_KEY] = label_value(search_id)
    return labels


def created_by_bot(qr: QueuedResourceInfo) -> bool:
    """Whether the bot created `qr` (any request): its node labels carry `managed-by=tpu-chatops`.

    The one test of "the bot made this" (recovery, the endpoint, previews); a name alone proves nothing.
    Deleting after a request also needs `made_by` (that request's own label and create time).
    """
    return qr.labels.get(MANAGED_BY_KEY) == MANAGED_BY


def made_by(qr: QueuedResourceInfo, request_id: str, sent_at: datetime | None = None) -> bool:
    """True when `qr` carries `request_id`'s label and (if `sent_at` is given) was created after it
    was sent, give or take CLOCK_SKEW."""
    if qr.labels.get(REQUEST_KEY) != label_value(request_id):
        return False
    if sent_at is not None and qr.create_time is not None:
        return qr.create_time >= sent_at - CLOCK_SKEW
    return True


def owner_text(qr: QueuedResourceInfo) -> str:
    """Who made `qr`, for people: "request r… of <user>", or "not created by this bot"."""
    created = qr.create_time.strftime("%Y-%m-%d %H:%M UTC") if qr.create_time else "at an unknown time"
    request = qr.labels.get(REQUEST_KEY)
    if qr.labels.get(MANAGED_BY_KEY) == MANAGED_BY and request:
        return f"created {created} by another request ({request})"
    return f"created {created}, not by this bot's request"


class NameTaken(AlreadyExists):
    """A resource with the requested name exists and this request did not make it: it is left alone."""

    def __init__(self, qr: QueuedResourceInfo, cause: OpsError | None = None) -> None:
        why = f" (the create answered: {cause.message})" if cause is not None else ""
        super().__init__(
            f"queued resource {qr.name} in {qr.zone} already exists ({qr.state}, {owner_text(qr)}); "
            f"it was left alone{why}",
            "pick another name, or use that resource",
            backend="tpu",
        )
        self.existing = qr


@dataclass(frozen=True)
class CreateOutcome:
    """What `create_owned` found out.

    Attributes:
        operation: the create operation's name when the API answered it; None after an ambiguous answer.
        resource: the queued resource read back after an ambiguous answer, when it is ours; else None.
        ambiguous: the error of an ambiguous answer (timeout, 5xx, or ALREADY_EXISTS for a create delivered
            twice), else None. With `operation` and
            `resource` both None the request was not found when read back: it may still appear (it stays
            recorded in flight, and clean-up checks it again by label).
        request_id: the request's id (its ownership label).
    """

    operation: str | None
    resource: QueuedResourceInfo | None = None
    ambiguous: OpsError | None = None
    request_id: str = ""


def read_back(
    tpu: TpuOps, name: str, zone: str, *, tries: int = 3, pause_s: float = 1.0
) -> QueuedResourceInfo | None:
    """Read a queued resource after an ambiguous answer: the resource, or None if it is not there.

    Raises:
        OpsError: it could not be read `tries` times (the caller must then assume nothing about it).
    """
    last: OpsError | None = None
    for attempt in range(tries):
        try:
            return tpu.get_queued_resource(name, [zone])
        except NotFound:
            return None
        except OpsError as exc:
            last = exc
            if attempt + 1 < tries:
                time.sleep(pause_s)
    assert last is not None
    raise last


def create_owned(
    tpu: TpuOps, spec: CreateSpec, request_id: str, sent_at: datetime, *, pause_s: float = 1.0
) -> CreateOutcome:
    """Send a create whose spec carries `request_id`'s label; after an ambiguous answer, read it back.

    Args:
        tpu: the TPU API.
        spec: the request; its labels must hold `ownership_labels(request_id, ...)`.
        request_id: the request's id.
        sent_at: when the request was (about to be) sent, aware UTC (for the create-time check).
        pause_s: seconds between read-back attempts.

    Returns:
        CreateOutcome (see there).

    An ALREADY_EXISTS answer is read back too: a create whose first answer was lost can reach the API
    twice, and the second delivery is refused although the first made the resource (then the outcome is
    that resource, with `ambiguous` the refusal).

    Raises:
        NameTaken: a resource with that name exists that this request did not make (the live primary,
            say): nothing may touch it.
        AlreadyExists: refused as existing, and nothing by that name was there when read back.
        UnsupportedInZone, BadInput, ...: the create was refused outright (nothing made).
        OpsError: ambiguous and the read-back failed too (the in-flight record keeps it for later).
    """
    try:
        return CreateOutcome(tpu.create_queued_resource(spec), request_id=request_id)
    except AlreadyExists as exc:
        # Refused as existing: someone's resource, or this very request delivered twice (a client that
        # resends a request whose answer was lost, as httplib2 does once): only the label tells.
        try:
            found = read_back(tpu, spec.name, spec.zone, pause_s=pause_s)
        except OpsError as again:
            raise BackendUnavailable(
                f"{exc.message}; reading it back to see whose it is failed: {again.message}",
                "it may be this request's own: it is recorded, and checked by label before any delete",
                backend="tpu",
            ) from exc
        if found is None:
            raise
        if not made_by(found, request_id, sent_at):
            raise NameTaken(found) from exc
        log.warning("create of %s in %s was delivered twice: the resource is ours", spec.name, spec.zone)
        return CreateOutcome(None, found, exc, request_id)
    except (BackendTimeout, BackendUnavailable) as exc:
        log.warning("ambiguous create of %s in %s (%s): reading it back", spec.name, spec.zone, exc.message)
        try:
            found = read_back(tpu, spec.name, spec.zone, pause_s=pause_s)
        except OpsError as again:
            raise type(exc)(
                f"{exc.message}; reading it back failed too: {again.message}",
                "it may exist: it is recorded and checked by label before anything is deleted",
                backend="tpu",
            ) from exc
        if found is None:
            return CreateOutcome(None, None, exc, request_id)
        if not made_by(found, request_id, sent_at):
            raise NameTaken(found, exc) from exc
        return CreateOutcome(None, found, exc, request_id)


DeleteOutcome = Literal["deleted", "absent", "not ours", "not verified"]


def delete_owned(
    tpu: TpuOps,
    name: str,
    zone: str,
    request_id: str,
    sent_at: datetime | None,
    *,
    timeout_s: float = 600.0,
    poll_s: float = 2.0,
) -> DeleteOutcome:
    """Delete (force) the queued resource `name` in `zone` only if `request_id` made it, and verify.

    Returns:
        "deleted" (it was ours, it is gone), "absent" (nothing by that name), "not ours" (left alone:
        another label, or none), "not verified" (ours, but it could not be deleted or shown gone in
        `timeout_s`).
    """
    deadline = time.monotonic() + timeout_s
    asked = False
    while True:
        try:
            qr = tpu.get_queued_resource(name, [zone])
        except NotFound:
            return "deleted" if asked else "absent"
        except OpsError as exc:
            log.warning("ownership: reading %s in %s: %s", name, zone, exc)
            qr = None
        if qr is not None and not made_by(qr, request_id, sent_at):
            return "not ours"  # also when ours was deleted and someone else re-made the name meanwhile
        if qr is not None and not asked and qr.state != "DELETING":
            try:
                remaining = max(0.1, deadline - time.monotonic())
                tpu.delete_queued_resource(
                    name, zone, force=True, wait=True, timeout_s=remaining, poll_s=poll_s
                )
                asked = True
                continue  # the operation is done: check at once that it is gone
            except NotFound:
                return "deleted"
            except OpsError as exc:
                log.warning("ownership: deleting %s in %s: %s", name, zone, exc)
        elif qr is not None:
            asked = True
        if time.monotonic() >= deadline:
            return "not verified"
        time.sleep(poll_s)


# ---- one operation per name


def operation_keys(project: str, scope: str, name: str) -> list[str]:
    """Lease keys for an operation on `name`: (project, scope, name), plus the capacity-search key when
    `scope` is a zone, so a create, delete or reset and a search of the same name exclude each other.

    Args:
        scope: a zone, or "search" for operations that may touch any zone (find, ensure).
    """
    keys = [f"{project}/{scope}/{name}"]
    if scope != "search":
        keys.append(f"{project}/search/{name}")
    return keys


@contextmanager
def hold_operation(
    store: Store,
    keys: list[str],
    operation_id: str,
    user_id: str,
    command: str,
    *,
    now: Callable[[], datetime],
    ttl_s: float = 120.0,
) -> Iterator[None]:
    """Hold the leases `keys` while the block runs, renewing them every `ttl_s / 3` seconds.

    If the process dies, the leases expire after `ttl_s` and the name is free again (and `reconcile`
    sees the operation is no longer running).

    Raises:
        OperationBusy: another running request holds one of the keys.
    """
    store.acquire_operation(keys, operation_id, user_id, command, ttl_s=ttl_s, now=now())
    stop = threading.Event()

    def heartbeat() -> None:
        while not stop.wait(ttl_s / 3):
            try:
                store.renew_operation(operation_id, ttl_s=ttl_s, now=now())
            except Exception:  # the next beat tries again; the lease outlives a few missed beats
                log.exception("could not renew the operation lease %s", operation_id)

    beat = threading.Thread(target=heartbeat, name=f"lease-{operation_id}", daemon=True)
    beat.start()
    try:
        yield
    finally:
        stop.set()
        beat.join()
        store.release_operation(operation_id)


def record_sending(
    store: Store,
    spec: CreateSpec,
    *,
    request_id: str,
    operation_id: str,
    kind: str,
    project: str,
    user_id: str,
    channel_id: str,
    now: datetime,
) -> InflightRequest:
    """Write a create down before it is sent (state "sending") and return the record."""
    record = InflightRequest(
        request_id=request_id,
        operation_id=operation_id,
        kind=kind,
        project=project,
        zone=spec.zone,
        name=spec.name,
        user_id=user_id,
        channel_id=channel_id,
        state="sending",
        sent_at=now.astimezone(UTC),
        updated_at=now.astimezone(UTC),
    )
    store.record_inflight(record)
    return record


# ---- reconciliation: at start and periodically after


def after_phrase(error: OpsError) -> str:
    """How an ambiguous create was answered, as the end of "appeared ... after the timeout": "after the
    timeout" (BackendTimeout), "after its answer was lost" (5xx, dropped connection), "after its duplicate
    was refused" (ALREADY_EXISTS for the request's own second delivery)."""
    if isinstance(error, BackendTimeout):
        return "after the timeout"
    if isinstance(error, AlreadyExists):
        return "after its duplicate was refused"
    return "after its answer was lost"


def record_ambiguous(store: Store, request_id: str, error: OpsError, *, now: datetime) -> None:
    """Keep an ambiguous create open ("sending") with how it was answered (`after_phrase`) as its note,
    for reconciliation to say what appeared and when."""
    store.update_inflight(request_id, "sending", now=now, note=after_phrase(error))


# Reconciled.action values that settle a record; "not verified" and "unseen" leave it open.
FINAL_ACTIONS = ("deleted", "adopted", "absent", "not ours")


@dataclass(frozen=True)
class Reconciled:
    """What reconciliation did with one in-flight create.

    Attributes:
        request: the in-flight record as it was read.
        action: "deleted" (a search's request, ours, gone now), "adopted" (a create's, ours, kept),
            "absent" (nothing there: already gone, or never seen within the watch), "not ours" (the name is
            taken by a resource without this request's label: left alone), "not verified" (ours, but it
            could not be read or shown deleted: tried again), "unseen" (an ambiguous create not seen yet,
            still within the watch: checked again).
        detail: one sentence for people, e.g. "`newx` appeared in `us-east5-a` after the timeout and was
            deleted".
    """

    request: InflightRequest
    action: str
    detail: str

    @property
    def final(self) -> bool:
        """Whether the record is settled (it is not checked again)."""
        return self.action in FINAL_ACTIONS


def reconcile(
    tpu: TpuOps,
    store: Store,
    *,
    now: Callable[[], datetime],
    watch_s: float = 3600.0,
    delete_timeout_s: float = 600.0,
    poll_s: float = 2.0,
) -> list[Reconciled]:
    """Settle the creates of `tpu.project` whose operation is no longer running (its lease expired or is
    gone): at start, after a crash, and periodically, for creates answered ambiguously that may appear
    after their command ended.

    A capacity-search request present and carrying its own label is deleted (nobody watches it and
    flex-start bills until `--max-run`); a `/tpu create`, `ensure` or `recover` request is adopted (the user
    asked for exactly that resource); a resource by that name without the request's label is left alone.
    A create never answered (still "sending") that is not there stays open for `watch_s` seconds after it
    was sent, then is closed as absent.

    Args:
        watch_s: how long an unanswered create is looked for, seconds.

    Returns:
        One Reconciled per open record of the project whose operation is not running (the caller audits
        and announces the final ones).
    """
    done: list[Reconciled] = []
    for request in store.inflight(open_only=True):
        if request.project != tpu.project or store.operation_running(request.operation_id, now()):
            continue
        where = f"`{request.name}` in `{request.zone}`"
        try:
            qr = read_back(tpu, request.name, request.zone, pause_s=poll_s)
        except OpsError as exc:
            done.append(Reconciled(request, "not verified", f"{where} could not be read: {exc.message}"))
            continue
        unanswered = request.state == "sending"
        after = request.note if unanswered and request.note.startswith("after ") else "while the bot was down"
        if qr is None:
            waited = (now() - request.sent_at).total_seconds()
            if unanswered and waited < watch_s:
                done.append(Reconciled(request, "unseen", f"{where} has not appeared in {waited:.0f} s"))
                continue
            action = "absent"
            detail = (
                f"{where} did not appear in {_minutes(watch_s)} after the create was sent: nothing was made"
                if unanswered
                else f"{where} is already gone"
            )
        elif not made_by(qr, request.request_id, request.sent_at):
            action, detail = "not ours", f"{where} exists but {owner_text(qr)}: left alone"
        elif request.kind in ("create", "ensure", "recover"):
            action = "adopted"
            detail = f"{where} appeared {after} ({qr.state}) and is kept: `/tpu {request.kind}` asked for it"
            if not unanswered:
                detail = f"{where} ({qr.state}) was asked for by `/tpu {request.kind}`: kept"
        else:
            action = delete_owned(
                tpu, request.name, request.zone, request.request_id, request.sent_at,
                timeout_s=delete_timeout_s, poll_s=poll_s,
            )  # fmt: skip
            seen = f"appeared {after} ({qr.state})" if unanswered else f"({qr.state}) outlived its search"
            ends = {"deleted": "was deleted", "absent": "is gone", "not ours": "was re-made by someone else"}
            detail = f"{where} {seen} and " + ends.get(action, "could not be deleted yet: tried again")
        item = Reconciled(request, action, detail)
        if item.final:
            store.update_inflight(request.request_id, action, now=now(), note=detail)
        done.append(item)
    return done


def _minutes(seconds: float) -> str:
    minutes = seconds / 60
    return f"{minutes:.0f} min" if minutes >= 1 else f"{seconds:.0f} s"


def labels_of(spec_labels: Mapping[str, str], owner: Mapping[str, str]) -> dict[str, str]:
    """The spec's labels with the ownership labels on top (ownership wins on a clash)."""
    return {**spec_labels, **owner}
