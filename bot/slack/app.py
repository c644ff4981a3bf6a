"""The Bolt app from Settings and Services, and the two ways Slack reaches it.

HTTP mode: Bolt's WSGI adapter behind waitress (a threaded WSGI server), requests at `/slack/events`, each
verified against the signing secret by `bot.slack.http_guard.SlackGate` before any of it is parsed (HTTP 401
otherwise, including requests over five minutes old; other malformed requests get their own 4xx).
Socket Mode: a websocket opened with the app-level token; no public URL needed.
Both modes serve the bot's own endpoints: `/healthz` (alive), `/readyz` (Slack auth and state database ok)
and `/metrics` (Prometheus; see `bot.observability`), the last only with METRICS_TOKEN as a bearer token, or
without one only to loopback clients (`bot.slack.http_guard.metrics_refusal`).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx
from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk.signature import SignatureVerifier
from sqlalchemy import text
from waitress import wasyncore
from waitress.server import create_server

import bot.handlers  # noqa: F401  (importing it declares every command on the registry)
from bot.commands.auth import Authorizer
from bot.commands.registry import Registry, registry
from bot.commands.runner import Runner
from bot.commands.workers import ACKS, prestart
from bot.config import Settings
from bot.deployments import Fleet
from bot.observability import Metrics, Readiness, trace_from_headers, use_trace
from bot.oncall import reconcile
from bot.oncall.sampler import HistorySampler
from bot.oncall.scheduler import AlertScheduler, OncallOptions
from bot.services import FANOUT_PER_WORKER, Services
from bot.slack import listeners
from bot.slack.gateway import SlackGateway
from bot.slack.http_guard import MAX_BODY_BYTES, SlackGate, WsgiApp, metrics_refusal, plain
from bot.version import DISTRIBUTION, bot_version
from ops.diagnosis import families as faults
from ops.store.state import Store

log = logging.getLogger(__name__)


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
