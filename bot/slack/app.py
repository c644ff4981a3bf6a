"""The Bolt app from Settings and Services, and the two ways Slack reaches it.

HTTP mode: Bolt's WSGI adapter behind waitress (a threaded WSGI server), requests at `/slack/events`, each
verified against the signing secret by the gate in front of Bolt (`SlackGate`) before any of it is parsed
(HTTP 401 otherwise, including requests over five minutes old; other malformed requests get their own 4xx,
and refusals are logged as size and hash, never the body).
Socket Mode: a websocket opened with the app-level token; no public URL needed.
Both modes serve the bot's own endpoints: `/healthz` (alive), `/readyz` (Slack auth and state database ok)
and `/metrics` (Prometheus; see `bot.observability`), the last only with METRICS_TOKEN as a bearer token, or
without one only to loopback clients (`metrics_refusal`).
"""

from __future__ import annotations

import gc
import hashlib
import hmac
import io
import ipaddress
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx
from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk.signature import SignatureVerifier
from sqlalchemy import text
from waitress import wasyncore
from waitress.server import create_server

import bot.handlers  # noqa: F401  (importing it declares every command on the registry)
from bot.commands.registry import Registry, registry
from bot.commands.runner import Authorizer, Runner
from bot.commands.workers import ACKS, prestart
from bot.config import Settings
from bot.observability import Metrics, Readiness, trace_from_headers, use_trace
from bot.oncall import reconcile
from bot.oncall.sampler import HistorySampler
from bot.oncall.scheduler import AlertScheduler, OncallOptions
from bot.services import FANOUT_PER_WORKER, Fleet, Services
from bot.slack import listeners
from bot.slack.gateway import SlackGateway
from bot.version import DISTRIBUTION, bot_version
from ops.diagnosis import families as faults
from ops.store.state import Store

log = logging.getLogger(__name__)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass
class Bot:
    """A wired bot: the Bolt app, its worker pool and its backends."""

    app: App
    runner: Runner
    services: Services
    registry: Registry
    metrics: Metrics = field(default_factory=Metrics)
    readiness: Readiness | None = None
    alerts: AlertScheduler | None = None
    sampler: HistorySampler | None = None
    listener_pool: ThreadPoolExecutor | None = None
    warmed: threading.Event = field(default_factory=threading.Event)
    reconciling: threading.Timer | None = None

    def close(self) -> None:
        """Stop everything the bot started: schedulers, thread pools, worker processes, the pending
        reconciliation, and every deployment's backends and state store (a restart or a test builds a new
        bot in the same process, so nothing may be left to the process's exit)."""
        if self.reconciling is not None:
            self.reconciling.cancel()
        if self.alerts is not None:
            self.alerts.shutdown()
        if self.sampler is not None:
            self.sampler.shutdown()
        if self.listener_pool is not None:
            self.listener_pool.shutdown(wait=False)
        self.runner.shutdown()
        every = [self.services, *(s for s in self.runner.fleet.services.values() if s is not self.services)]
        for services in every:
            services.close()
        for store in {id(s.store): s.store for s in every}.values():
            store.close()


def build(settings: Settings, services: Services | None = None, fleet: Fleet | None = None) -> Bot:
    """Build the Bolt app. Calls Slack's `auth.test` once to check the bot token.

    Args:
        settings: the environment's settings.
        services: the backends of a single deployment (tests, the demo); default: built from `settings`.
        fleet: every deployment; default: `services` alone, or DEPLOYMENTS_FILE's (sharing one state store).

    Raises:
        slack_bolt.error.BoltError: the token was refused by Slack.
    """
    if fleet is None and services is None:
        store = Store(settings.state_database_url)
        fleet = Fleet.from_settings(settings, lambda each: Services.from_settings(each, store=store))
    if services is None:
        assert fleet is not None
        services = fleet.first
    faults.use_extra_file(settings.fault_catalogue_file)
    slack = SlackGateway.connect(settings.slack_bot_token.get_secret_value(), settings.slack_api_url)
    signing_secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else ""
    listener_pool = ThreadPoolExecutor(max_workers=LISTENER_THREADS, thread_name_prefix="listener")
    app = App(
        client=slack.client,
        signing_secret=signing_secret,
        request_verification_enabled=settings.bot_mode == "http",
        # Unhandled requests go to bot.slack.listeners.on_error, not Bolt's WARNING with a code hint.
        raise_error_for_unhandled_request=True,
        # Listeners only parse and ack; a pool wider than Bolt's default 5 keeps acks fast in bursts.
        listener_executor=listener_pool,
    )
    # App() has just called auth.test (it raises BoltError otherwise): Slack auth is ok at start.
    metrics = Metrics()
    warmed = threading.Event()
    warmed.set()  # nothing to wait for unless `serve` warms up first
    readiness = Readiness(slack.auth_test, lambda: _ping(services), auth_ok=True, warmed=warmed)
    runner = Runner(
        services, registry, slack, Authorizer(services.settings, slack), metrics=metrics, fleet=fleet
    )
    alerts = _alert_schedulers(runner, slack, metrics)
    listeners.register(app, registry, runner, alerts)
    reconciling = reconcile.start(runner)
    return Bot(
        app=app,
        runner=runner,
        services=services,
        registry=registry,
        metrics=metrics,
        readiness=readiness,
        alerts=alerts,
        sampler=HistorySampler(runner.fleet, settings.history_interval_s),
        listener_pool=listener_pool,
        warmed=warmed,
        reconciling=reconciling,
    )


def _alert_schedulers(runner: Runner, slack: SlackGateway, metrics: Metrics) -> AlertScheduler | None:
    """One AlertScheduler per deployment of `runner.fleet` with an alert channel (its own channel, rules,
    watch state, recovery budget and maintenance window; automatic recovery runs through `runner`); the
    first runs them all under the one scheduler lease. Returns it, or None when no deployment sets
    ALERT_CHANNEL / `alert_channel`."""
    fleet = runner.fleet
    schedulers: list[AlertScheduler] = []
    for name, services in fleet.services.items():
        watched = services.settings
        if not watched.alert_channel:
            log.info("deployment %s has no alert channel: not watched", name)
            continue
        # Another deployment's primary in the same project is listed here too; its own deployment alerts.
        elsewhere = frozenset(
            other.settings.tpu_primary
            for other_name, other in fleet.services.items()
            if other_name != name and other.settings.gcp_project == watched.gcp_project
        )
        schedulers.append(
            AlertScheduler.build(
                services,
                slack,
                watched.alert_channel,
                runner=runner,
                interval_s=watched.alert_interval_s,
                thresholds=[int(minutes) for minutes in watched.alert_thresholds_min],
                on_sent=lambda kind: metrics.alerts_sent.labels(kind=kind).inc(),
                on_tick=metrics.alert_tick_finished,
                options=OncallOptions.from_settings(watched, elsewhere - {watched.tpu_primary}),
                deployment=name,
            )
        )
    if not schedulers:
        return None
    _bind_alert_channels(fleet, schedulers)
    first, *peers = schedulers
    first.peers = peers
    return first


def _bind_alert_channels(fleet: Fleet, schedulers: list[AlertScheduler]) -> None:
    """Bind each deployment's own alert channel to it, so its alert buttons (Delete now, Recover), clicked
    there, act on it instead of being refused as a guess. A channel bound in DEPLOYMENTS_FILE, or the alert
    channel of several deployments (ALERT_CHANNEL inherited), stays as it is."""
    users: dict[str, list[str]] = {}
    for each in schedulers:
        users.setdefault(each.channel, []).append(each.deployment)
    for channel, names in users.items():
        if len(names) == 1 and len(fleet.services) > 1:
            fleet.channels.setdefault(channel, names[0])


LISTENER_THREADS = 32


WARM_UP_REQUESTS = 32


def warm_up(bot: Bot, url: str | None = None) -> None:
    """Do now what would otherwise happen lazily during the first burst of commands, competing with its
    acks for the interpreter lock: start the worker processes (`bot.commands.workers`; they import in their
    own
    processes while the rest goes on here), every thread of the listener and command pools and those of one
    zone listing (`TpuOps.warm`), each with its TPU API clients built; open the state database; with the
    server's `url` (HTTP mode), send it WARM_UP_REQUESTS signed slash commands at once that only get a usage
    line (`/tpu` with an unknown subcommand: acked, nothing run, nothing audited), so the whole ack path has
    run before Slack's first request. Then wait for the worker processes and set `bot.warmed` (`/readyz`
    answers 503 "warming up" until then: a stop right after ready finds no worker still importing)."""
    started = time.monotonic()
    try:
        workers = bot.services.workers.start()
        if bot.listener_pool is not None:
            prestart(bot.listener_pool, LISTENER_THREADS)
        bot.runner.warm()
        settings = bot.services.settings
        prestart(bot.services.fanout, FANOUT_PER_WORKER * (settings.worker_threads + settings.model_threads))
        bot.services.tpu.warm(len(settings.tpu_zones))
        _ping(bot.services)
        secret = bot.services.settings.slack_signing_secret
        if url is not None and secret is not None:
            _warm_ack_path(url, secret.get_secret_value())
        in_process_s = time.monotonic() - started
        for future in workers:
            future.result()
        # What start-up allocated lives as long as the process: keep it out of the garbage collector's
        # full collections, which hold the interpreter lock (acks wait) for longer the more objects exist.
        gc.freeze()
        log.info(
            "warmed up in %.1f s (this process's part %.1f s, beside %d worker processes starting)",
            time.monotonic() - started,
            in_process_s,
            len(workers),
        )
    except Exception:  # serve anyway: slower first commands beat no bot
        log.exception("warm-up failed after %.1f s; serving cold", time.monotonic() - started)
    finally:
        bot.warmed.set()


def _warm_ack_path(url: str, signing_secret: str) -> None:
    body = urlencode({"command": "/tpu", "text": "warm-up", "user_id": "", "channel_id": ""})
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": SignatureVerifier(signing_secret).generate_signature(
            timestamp=timestamp, body=body
        )
        or "",
    }
    with httpx.Client(timeout=30) as client, ThreadPoolExecutor(WARM_UP_REQUESTS) as pool:
        statuses = list(
            pool.map(
                lambda _: client.post(f"{url}/slack/events", content=body, headers=headers).status_code,
                range(WARM_UP_REQUESTS),
            )
        )
    if any(status != 200 for status in statuses):
        log.warning("warm-up requests answered %s", sorted(set(statuses)))


def _ping(services: Services) -> None:
    """`SELECT 1` on the state database (raises if it does not answer)."""
    with services.store.engine.connect() as conn:
        conn.execute(text("SELECT 1"))


# waitress refuses a larger body from its Content-Length before reading it (HttpServer); Slack's largest
# payloads (a modal's state) are far smaller.
MAX_BODY_BYTES = 1_000_000
# Slack's payloads nest about ten deep (a view's blocks and state); deeper JSON is no Slack request, and past
# the interpreter's recursion limit it would raise wherever it is walked.
MAX_JSON_DEPTH = 64
# "If the request timestamp is more than five minutes from local time, it could be a replay attack"
# (https://docs.slack.dev/authentication/verifying-requests-from-slack/).
MAX_SIGNATURE_AGE_S = 300
# A kind of refusal (status and reason) is logged at most once in this many seconds, with a count of the
# others: a flood of hostile requests must not become a flood of log lines.
REFUSAL_LOG_EVERY_S = 10.0
_HEX = frozenset("0123456789abcdef")
_CONTENT_TYPES = ("application/x-www-form-urlencoded", "application/json")


class Refused(Exception):
    """A request the gate answers itself: `status` ("401 Unauthorized") and a one-line `reason`."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class SlackGate:
    """WSGI middleware in front of Bolt on `/slack/events`: refuses, with a 4xx and a one-line reason, every
    request to `app` that is not a Slack request signed with `signing_secret`, before any of it is parsed.

    Bolt's WSGI adapter (`slack_bolt.adapter.wsgi.SlackRequestHandler`) builds a `BoltRequest` first, and
    that parses the body (`json.loads` of anything starting with `{`, of a form's `payload` field) before its
    `RequestVerification` middleware checks the signature; a bad signature is then logged at INFO with the
    whole body. So an unsigned request could cost a JSON parse, raise (HTTP 500: a non-numeric timestamp, a
    form body starting with `{`, JSON nested past the recursion limit) and put megabytes into the log. The
    gate checks first, with only the two headers and the raw bytes:

    1. the method is POST (405), `X-Slack-Request-Timestamp` is a whole number within five minutes of now
       and `X-Slack-Signature` is `v0=` + 64 hex digits (401), the body length is given and at most
       MAX_BODY_BYTES (411, 413);
    2. the body is read (its declared length, no more) and its signature checked: HMAC-SHA256 of
       `v0:{timestamp}:{body}` with the signing secret, compared in constant time
       (https://docs.slack.dev/authentication/verifying-requests-from-slack/). The bytes themselves are
       signed, so nothing is decoded before this (slack_sdk's `SignatureVerifier` decodes them as UTF-8
       first);
    3. only then the shape Bolt will parse: a form or JSON content type (415), UTF-8 (400), a JSON object (or
       a form whose `payload` is one) nested at most MAX_JSON_DEPTH deep (400).

    A refused request costs at most one read of its body and one HMAC; its log line gives the status, the
    reason, the size and (when read) a SHA-256 prefix of the body, never the body; a flood of them is one
    line per kind of refusal every REFUSAL_LOG_EVERY_S, counting the others. An accepted one is handed to
    the wrapped app with its body put back, and Bolt verifies it again.

    Args:
        app: the WSGI app of Bolt (`SlackRequestHandler`), called only for accepted requests.
        signing_secret: the app's signing secret; empty refuses every request.
        clock: seconds since the epoch (tests move it).
    """

    def __init__(self, app: WsgiApp, signing_secret: str, *, clock: Callable[[], float] = time.time) -> None:
        self._app = app
        self._secret = signing_secret.encode()
        self._clock = clock

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            body = self._signed_body(environ)
            _check_shape(environ, body)
        except Refused as refused:
            return plain(start_response, refused.status, refused.reason)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return self._app(environ, start_response)

    def _signed_body(self, environ: dict[str, Any]) -> bytes:
        """The body of a request signed with the secret, read only once the headers allow it.

        Raises:
            Refused: 405, 401, 411, 413 or 400 (a body shorter than its length).
        """
        if environ.get("REQUEST_METHOD") != "POST":
            raise Refused("405 Method Not Allowed", "POST only")
        timestamp = str(environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP", ""))
        signature = str(environ.get("HTTP_X_SLACK_SIGNATURE", ""))
        if not (0 < len(timestamp) <= 12 and timestamp.isascii() and timestamp.isdigit()):
            raise _unsigned("missing or malformed X-Slack-Request-Timestamp", environ)
        if not (len(signature) == 67 and signature.startswith("v0=") and set(signature[3:]) <= _HEX):
            raise _unsigned("missing or malformed X-Slack-Signature", environ)
        if abs(self._clock() - int(timestamp)) > MAX_SIGNATURE_AGE_S:
            raise _unsigned("X-Slack-Request-Timestamp is more than five minutes from now", environ)
        if not self._secret:
            raise _unsigned("no signing secret is configured", environ)
        declared = str(environ.get("CONTENT_LENGTH") or "")
        if not (declared.isascii() and declared.isdigit()):
            raise _refused("411 Length Required", "Content-Length missing or malformed", environ)
        length = int(declared)
        if length > MAX_BODY_BYTES:
            raise _refused("413 Payload Too Large", "body too large", environ)
        body = environ["wsgi.input"].read(length) if length else b""
        if len(body) != length:
            raise _refused("400 Bad Request", "body shorter than its Content-Length", environ, body)
        signed = b"v0:" + timestamp.encode() + b":" + body
        expected = "v0=" + hmac.new(self._secret, signed, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, signature):
            raise _unsigned("signature does not match", environ, body)
        return body


def _check_shape(environ: dict[str, Any], body: bytes) -> None:
    """Refuse a signed body Bolt could not parse: the wrong content type, not UTF-8, not a JSON object (or a
    form whose `payload` is not one), JSON nested deeper than MAX_JSON_DEPTH, a form starting with `{`
    (Bolt reads any body starting with `{` as JSON).

    Raises:
        Refused: 415 or 400.
    """
    content_type = str(environ.get("CONTENT_TYPE", "")).split(";", 1)[0].strip().lower()
    if content_type not in _CONTENT_TYPES:
        raise _refused("415 Unsupported Media Type", "a Slack request is a form or JSON", environ, body)
    try:
        text = body.decode()
        if content_type == "application/json":
            payload: Any = json.loads(text)
        elif text.startswith("{"):
            raise ValueError("a form body starting with {")
        else:
            # Bolt reads a form as its `payload` field when "payload" appears anywhere in the body.
            fields = dict(parse_qsl(text, keep_blank_values=True)) if "payload" in text else {}
            payload = fields.get("payload", {})
            if isinstance(payload, str):
                payload = json.loads(payload)
    except (ValueError, RecursionError):
        raise _refused("400 Bad Request", "body is not a Slack request", environ, body) from None
    if not isinstance(payload, dict) or _depth(payload) > MAX_JSON_DEPTH:
        raise _refused("400 Bad Request", "body is not a Slack request", environ, body)


def _depth(value: Any) -> int:
    """How deep containers nest in a parsed JSON value (an object holding a list: 2), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_JSON_DEPTH:  # deeper is refused anyway: walk no further
                children = item.values() if isinstance(item, dict) else item
                stack.extend((child, depth + 1) for child in children)
    return deepest


def _unsigned(reason: str, environ: dict[str, Any], body: bytes | None = None) -> Refused:
    return _refused("401 Unauthorized", reason, environ, body)


def _refused(status: str, reason: str, environ: dict[str, Any], body: bytes | None = None) -> Refused:
    """The Refused to raise, logged (`_REFUSALS`) as status, reason, size and a hash of the body, never the
    body itself (it may be megabytes, and it is the sender's text)."""
    code = status.split()[0]
    skipped = _REFUSALS.skipped_before(code, reason)
    if skipped is not None:
        size = len(body) if body is not None else str(environ.get("CONTENT_LENGTH") or "?")[:20]
        digest = f", sha256 {hashlib.sha256(body).hexdigest()[:16]}" if body else ""
        more = f"; {skipped} more like it in the last {REFUSAL_LOG_EVERY_S:.0f} s" if skipped else ""
        log.info("refused %s on /slack/events: %s (%s bytes%s)%s", code, reason, size, digest, more)
    return Refused(status, reason)


class RefusalLog:
    """When to log a kind of refusal: the first one, then one every `every_s`, each with the count of those
    not logged since (the kinds are the gate's fixed reasons, so the table stays small)."""

    def __init__(
        self, every_s: float = REFUSAL_LOG_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._every_s = every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._kinds: dict[tuple[str, str], tuple[float, int]] = {}

    def skipped_before(self, status: str, reason: str) -> int | None:
        """None when this refusal is not to be logged, else how many of its kind were not since the last."""
        now = self._clock()
        with self._lock:
            logged_at, skipped = self._kinds.get((status, reason), (float("-inf"), 0))
            if now - logged_at < self._every_s:
                self._kinds[(status, reason)] = (logged_at, skipped + 1)
                return None
            self._kinds[(status, reason)] = (now, 0)
            return skipped


_REFUSALS = RefusalLog()


def plain(start_response: Callable[..., Any], status: str, text: str) -> list[bytes]:
    """A text/plain response of one line."""
    start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
    return [text.encode() + b"\n"]


def metrics_refusal(environ: dict[str, Any], token: str | None) -> Refused | None:
    """Who may read `/metrics`: with a token configured (METRICS_TOKEN), a request carrying
    `Authorization: Bearer <token>` (compared in constant time); without one, only a client on the loopback
    interface (a scraper beside the bot, e.g. a sidecar), since the exposition tells command names, error
    counts and backends to anyone who asks.

    Returns:
        None when allowed, else the Refused (401 without the right token, 403 from another address).
    """
    if token:
        given = str(environ.get("HTTP_AUTHORIZATION", ""))
        scheme, _, credentials = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(), token.encode()):
            return None
        return Refused("401 Unauthorized", "/metrics needs Authorization: Bearer <METRICS_TOKEN>")
    if _is_loopback(str(environ.get("REMOTE_ADDR", ""))):
        return None
    return Refused("403 Forbidden", "/metrics is served only on loopback unless METRICS_TOKEN is set")


def _is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def wsgi(bot: Bot, *, slack_events: bool = True) -> WsgiApp:
    """A WSGI app: `/healthz` answers 200 while the process is alive; `/readyz` 200 when Slack auth and the
    state database are ok (503 and a one-line reason otherwise); `/metrics` the Prometheus exposition (with
    METRICS_TOKEN as a bearer token, or to loopback clients when none is set); with `slack_events`,
    `/slack/events` goes through `SlackGate` to Bolt (HTTP mode). In Socket Mode `/slack/events` is not
    served, so no unsigned path into Bolt exists."""
    settings = bot.services.settings
    project = settings.gcp_project or None
    metrics_token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
    slack: WsgiApp | None = None
    if slack_events:
        bolt = SlackRequestHandler(bot.app, path="/slack/events")

        def signed(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            # Only signed requests count as acks in flight (command work waits for those, not for refusals).
            ACKS.enter()
            try:
                with use_trace(trace_from_headers(environ, project)):
                    response = bolt(environ, start_response)
            finally:
                ACKS.leave()
            bot.metrics.ack_latency.observe(time.monotonic() - environ[_ARRIVED])
            return response

        secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else ""
        slack = SlackGate(signed, secret)

    def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        environ[_ARRIVED] = time.monotonic()
        path = environ.get("PATH_INFO")
        if path == "/healthz":
            return plain(start_response, "200 OK", f"ok {DISTRIBUTION} {bot_version()}")
        if path == "/readyz":
            reason = bot.readiness.problem() if bot.readiness is not None else None
            if reason is not None:
                return plain(start_response, "503 Service Unavailable", reason)
            return plain(start_response, "200 OK", "ready")
        if path == "/metrics":
            refused = metrics_refusal(environ, metrics_token)
            if refused is not None:
                return plain(start_response, refused.status, refused.reason)
            body, content_type = bot.metrics.exposition()
            start_response("200 OK", [("Content-Type", content_type)])
            return [body]
        if slack is None or path != "/slack/events":
            return plain(start_response, "404 Not Found", "not found")
        return slack(environ, start_response)

    return application


_ARRIVED = "tpu_chatops.arrived"  # the WSGI environ key of a request's arrival (time.monotonic())


# waitress's default is 256 KiB.
MAX_REQUEST_HEADER_BYTES = 32_768

# How long `HttpServer.close` waits for the server's loop to end after closing its connections.
SERVER_CLOSE_WAIT_S = 5.0


class HttpServer:
    """The bot's HTTP server (waitress). `port` is the bound port (useful with port 0)."""

    def __init__(
        self, bot: Bot, host: str, port: int, threads: int = 16, *, slack_events: bool = True
    ) -> None:
        app = wsgi(bot, slack_events=slack_events)
        # waitress refuses new connections past connection_limit (default 100); Slack bursts can exceed it.
        # max_request_body_size: waitress answers 413 from the Content-Length (or the chunked size so far)
        # before the app runs, so an oversized body is never read into memory.
        self._server = create_server(
            app,
            host=host,
            port=port,
            threads=threads,
            connection_limit=1000,
            ident="tpu-chatops",
            max_request_body_size=MAX_BODY_BYTES,
            # Slack's headers are a few hundred bytes; a larger block is refused (431) before the app runs.
            max_request_header_size=MAX_REQUEST_HEADER_BYTES,
            # poll(), not select(): select() fails on a descriptor numbered above 1024 (FD_SETSIZE), which a
            # long-running process with many connections and worker pipes can reach.
            asyncore_use_poll=True,
        )
        self.host = host
        self.port = int(self._server.effective_port)
        self._looping = threading.Event()
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def serve_forever(self) -> None:
        self._looping.set()
        try:
            self._server.run()
        finally:
            self._looping.clear()
            self._stopped.set()

    def close(self) -> None:
        """Stop serving, in an order that leaves no thread using a closed descriptor: stop accepting, let the
        worker threads finish the requests they hold (waitress waits up to 5 s), then close the open
        connections and the wake-up pipe on the server's own loop thread, which ends `serve_forever`.

        waitress's own `close()` closes the wake-up pipe at once: a worker finishing a response afterwards
        writes to it (`waitress/channel.py` calls `pull_trigger()`) and logs `OSError: [Errno 9] Bad file
        descriptor`; closed from another thread, a connection can also vanish under the loop's poll().
        """
        server = self._server
        channels = server._map  # the listening socket, the wake-up pipe and every open connection
        if not self._looping.is_set():
            server.task_dispatcher.shutdown()
            wasyncore.close_all(channels)
            return
        self._on_loop(lambda: wasyncore.dispatcher.close(server))
        server.task_dispatcher.shutdown()
        self._on_loop(lambda: wasyncore.close_all(channels))
        self._stopped.wait(SERVER_CLOSE_WAIT_S)

    def _on_loop(self, job: Callable[[], object]) -> None:
        """Run `job` on the server's loop thread (waitress's wake-up pipe runs it there), or here if the pipe
        is already closed (the loop closes it when poll() reports it hung up)."""
        try:
            self._server.trigger.pull_trigger(job)
        except OSError:
            job()


def socket_state(handler: SocketModeHandler) -> Callable[[], str | None]:
    """A readiness check of the Socket Mode websocket: None while connected, else a one-line reason
    (slack_sdk's SocketModeClient reconnects by itself; /readyz says when it is down meanwhile)."""

    def check() -> str | None:
        if handler.client.is_connected():
            return None
        return "Socket Mode websocket not connected (reconnecting; check SLACK_APP_TOKEN and outbound HTTPS)"

    return check


def serve(settings: Settings) -> None:
    """Run the bot in the mode `BOT_MODE` selects, until interrupted. Both modes serve `/healthz` on
    BOT_HOST:BOT_PORT; only HTTP mode serves `/slack/events`."""
    bot = build(settings)
    bot.warmed.clear()
    socket_mode = settings.bot_mode == "socket"
    server = HttpServer(
        bot,
        settings.bot_host,
        settings.bot_port,
        threads=settings.worker_threads,
        slack_events=not socket_mode,
    )
    local = f"http://127.0.0.1:{server.port}" if not socket_mode else None
    warming = threading.Thread(target=warm_up, args=(bot, local), name="warm-up", daemon=True)
    warming.start()
    if bot.alerts is not None:
        bot.alerts.start()
    if bot.sampler is not None:
        bot.sampler.start()
    try:
        if socket_mode:
            assert settings.slack_app_token is not None  # checked by Settings
            handler = SocketModeHandler(bot.app, settings.slack_app_token.get_secret_value())
            if bot.readiness is not None:
                bot.readiness.connection_check = socket_state(handler)
            threading.Thread(target=server.serve_forever, name="healthz", daemon=True).start()
            log.info("starting in Socket Mode; health at %s/healthz", server.url)
            try:
                handler.start()
            finally:
                handler.close()  # the websocket and its threads
        else:
            log.info("listening on %s/slack/events", server.url)
            server.serve_forever()
    finally:
        server.close()
        bot.close()
