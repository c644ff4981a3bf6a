"""A deployment at run time: the backends a command may use, built once from its Settings (`Services`; tests
and the demo only change endpoints), every deployment of the bot and the channels bound to them (`Fleet`,
from DEPLOYMENTS_FILE, whose format is `bot.deployments`), who answers on its vLLM port (`identify`), and a
source of a reply fetched concurrently on its fan-out pool (`settled`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar
from urllib.parse import urlsplit

from google.auth.credentials import Credentials
from google.oauth2 import service_account

from bot.commands.workers import CpuWorkers
from bot.config import Settings
from bot.deployments import read_deployments, settings_for
from llm.client import ChosenModel, GemmaClient, ModelTarget, ProbeResult, choose_models
from ops.errors import BadInput, OpsError
from ops.gcp import cloudlogs
from ops.gcp.cloudlogs import LogEntry
from ops.gcp.iam import CLOUD_PLATFORM_SCOPE
from ops.gcp.secrets import SecretStore
from ops.store.state import Store
from ops.tpu.api import TpuOps, pool_size
from ops.vllm.container import ContainerStatus, VllmContainer, VllmSpec, exit_reason
from ops.vllm.endpoint import Endpoint, EndpointResolver
from ops.vllm.server import (
    HealthCheck,
    ModelCard,
    ServerIdentity,
    VllmClient,
    server_identity,
    server_start_time,
)
from ops.vllm.ssh import PublishedHostKeys, RemoteHost

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT = "default"
"""The name of the one deployment the environment makes when no DEPLOYMENTS_FILE is set."""
_API_KEY_LOCK = threading.Lock()
_KEPT_LOCK = threading.Lock()
FANOUT_PER_WORKER = 4
"""Fan-out threads per command worker thread (/tpu status runs 4 sources at once)."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _credentials(path: str | None) -> Credentials | None:
    """A service-account key file's credentials (cloud-platform scope), or None for the default (ADC).

    Raises:
        BadInput: the file cannot be read as a service-account key.
    """
    if path is None:
        return None
    try:
        return service_account.Credentials.from_service_account_file(path, scopes=[CLOUD_PLATFORM_SCOPE])
    except (OSError, ValueError) as exc:
        raise BadInput(f"GOOGLE_CREDENTIALS_FILE {path}: {exc}", "give a service-account JSON key") from None


@dataclass
class Services:
    """Backends for handlers. `vllm()` and `gemma()` resolve the endpoint on each call (it can move)."""

    settings: Settings
    tpu: TpuOps
    endpoints: EndpointResolver
    store: Store
    secrets: SecretStore
    now: Callable[[], datetime] = _utcnow
    _secret_api_key: str | None = field(default=None, repr=False)
    workers: CpuWorkers = field(default_factory=CpuWorkers)
    # Shared threads for a command's concurrent backend calls (e.g. /tpu status's sources). A pool per
    # command would start threads during a burst, and every thread start holds a lock that all
    # ThreadPoolExecutor.submit calls of the process take, the ack path's included.
    fanout: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(FANOUT_PER_WORKER, thread_name_prefix="fanout")
    )
    _kept: dict[tuple[str, str | None], VllmClient] = field(default_factory=dict, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings, *, store: Store | None = None) -> Services:
        """Build every backend from `settings`; `store` shares one state store between deployments."""
        credentials = _credentials(settings.google_credentials_file)
        # One library retry of a 429/5xx keeps a failing Google call within about 2 x GOOGLE_TIMEOUT_S.
        tpu = TpuOps(
            settings.gcp_project,
            api_endpoint=settings.google_api_endpoint,
            credentials=credentials,
            timeout_s=settings.google_timeout_s,
            num_retries=1,
            # A few threads per configured zone, started when calls need them (ops.tpu.api.pool_size).
            max_workers=pool_size(len(settings.tpu_zones)),
        )
        endpoints = EndpointResolver(
            settings.vllm_base_url,
            tpu,
            settings.tpu_zones,
            settings.vllm_port,
            primary=settings.tpu_primary,
            internal_ip=settings.vllm_use_internal_ip,
        )
        store = store or Store(settings.state_database_url)
        secrets = SecretStore(
            settings.gcp_project, api_endpoint=settings.google_api_endpoint, credentials=credentials
        )
        return cls(
            settings=settings,
            tpu=tpu,
            endpoints=endpoints,
            store=store,
            secrets=secrets,
            workers=CpuWorkers(settings.cpu_workers),
            fanout=ThreadPoolExecutor(
                FANOUT_PER_WORKER * (settings.worker_threads + settings.model_threads),
                thread_name_prefix="fanout",
            ),
        )

    def close(self) -> None:
        """Stop this deployment's threads and worker processes (waits for running CPU jobs). The state
        store may be shared between deployments: its owner closes it."""
        self.fanout.shutdown(wait=False)
        for client in self._kept.values():
            client.close()
        self.tpu.close()
        self.secrets.close()
        self.workers.shutdown()

    def vllm(self) -> tuple[VllmClient, Endpoint]:
        """A vLLM client for the current endpoint, and that endpoint. Raises what `resolve()` raises."""
        endpoint = self.endpoints.resolve()
        return self.vllm_at(endpoint), endpoint

    def vllm_at(self, endpoint: Endpoint) -> VllmClient:
        """A vLLM client for a known endpoint (close it, or use it as a context manager)."""
        return VllmClient(endpoint.url, api_key=self._api_key(), timeout_s=self.settings.http_timeout_s)

    def vllm_kept(self, endpoint: Endpoint) -> VllmClient:
        """The vLLM client of `endpoint` kept between commands (closed by `close`, never by the caller; one
        per endpoint URL and API key the deployment has had), for the reads every /fleet makes: a client
        per call took 0.5 ms of CPU to build, and its own connections."""
        key = (endpoint.url, self._api_key())
        with _KEPT_LOCK:
            if key not in self._kept:
                self._kept[key] = self.vllm_at(endpoint)
            return self._kept[key]

    def gemma(self) -> tuple[GemmaClient, Endpoint]:
        """An OpenAI-compatible client of the served model, and the endpoint it uses."""
        endpoint = self.endpoints.resolve()
        client = GemmaClient(
            endpoint.url,
            model=self.settings.vllm_model,
            api_key=self._api_key(),
            timeout_s=self.settings.http_timeout_s,
        )
        return client, endpoint

    def probe(self) -> ProbeResult:
        """A one-token chat completion from the served model (`GemmaClient.probe`), its client closed after.

        Returns:
            ProbeResult: the model that answered, the wall time in seconds and the token counts.

        Raises:
            OpsError: the endpoint cannot be resolved, or the completion failed (BackendTimeout when it timed
                out, BackendUnavailable when refused or malformed, ...: `llm.client.translate_errors`).
        """
        gemma, _ = self.gemma()
        with gemma:  # closes its connection pool
            return gemma.probe()

    def models(self, failures: list[str]) -> Iterator[ChosenModel]:
        """The model servers that answer, in order: the primary vLLM endpoint, then LLM_FALLBACK_BASE_URL.

        Args:
            failures: receives one line per server that could not be used (why), for the "rules only" note.

        Yields:
            ChosenModel (see `llm.client.choose_models`); move to the next when a request to one fails.
        """
        s = self.settings
        targets = []
        try:
            primary = self.endpoints.resolve()
            targets.append(ModelTarget("primary endpoint", primary.url, s.vllm_model, self._api_key()))
        except OpsError as exc:
            failures.append(f"primary endpoint: {exc.message}")
        if s.llm_fallback_base_url:
            key = s.llm_fallback_api_key.get_secret_value() if s.llm_fallback_api_key else None
            targets.append(ModelTarget("fallback", s.llm_fallback_base_url, s.llm_fallback_model, key))
        return choose_models(
            targets,
            context_setting=s.llm_context_tokens,
            timeout_s=s.llm_timeout_s,
            list_timeout_s=s.http_timeout_s,
            failures=failures,
        )

    def ssh_target(self, *, fresh: bool = False) -> dict[str, str]:
        """Where SSH goes now and which VM that is, as a confirmation pins it: "host" (SSH_HOST, else the
        vLLM endpoint's host), and for an endpoint found from a node its "node", the node's "created" time
        (ISO) and its queued "resource" (all "" when not known).

        Args:
            fresh: resolve the endpoint again, not from its cache (a confirmation's check).

        Raises:
            What `resolve()` raises, when SSH_HOST is unset and no endpoint is found.
        """
        s = self.settings
        try:
            endpoint: Endpoint | None = self.endpoints.resolve(fresh=fresh)
        except OpsError:
            if not s.ssh_host:
                raise
            endpoint = None
        host = s.ssh_host or (urlsplit(endpoint.url).hostname if endpoint else "") or ""
        created = endpoint.node_created if endpoint else None
        return {
            "host": host,
            "node": endpoint.node if endpoint else "",
            "created": created.isoformat() if created else "",
            "resource": endpoint.resource if endpoint else "",
        }

    def remote(self, host: str | None = None, *, timeout_s: float | None = None) -> RemoteHost:
        """An SSH connection to the TPU VM, host key checked: to `host`, else SSH_HOST, else the vLLM
        endpoint's host; `timeout_s` bounds its connect and each command, seconds (None: `RemoteHost`'s
        defaults).

        The host keys are SSH_KNOWN_HOSTS_PATH's and SSH_HOST_KEYS', and, when SSH goes to the endpoint's
        node (SSH_HOST unset), the keys that node's guest attributes publish: the endpoint is only ever a
        node of the primary (TPU_PRIMARY) or of a queued resource carrying the bot's `managed-by` label
        (`ops.vllm.server.EndpointResolver`), so a VM the bot did not make or was not told to use is never
        trusted that way.

        Raises:
            BadInput: no SSH key, or no trusted host key at all. What `resolve()` raises (SSH_HOST unset and
                no `host`).
        """
        s = self.settings
        if not s.ssh_key_path:
            raise BadInput("SSH is not configured: SSH_KEY_PATH is unset", "see docs/ssh.md")
        endpoint: Endpoint | None = None
        if not s.ssh_host:
            try:
                endpoint = self.endpoints.resolve()
            except OpsError:
                if not host:
                    raise
        host = host or s.ssh_host or (urlsplit(endpoint.url).hostname if endpoint else "") or ""
        pinned = dict(key.split(maxsplit=1) for key in s.ssh_host_keys)
        remote = RemoteHost(
            host,
            s.ssh_port,
            user=s.ssh_user,
            key_path=s.ssh_key_path,
            known_hosts_path=s.ssh_known_hosts_path,
            pinned_host_keys=pinned,
            published_host_keys=self._published_host_keys(endpoint, host),
            sudo=s.ssh_sudo,
        )
        if timeout_s is not None:
            remote.connect_timeout_s = remote.command_timeout_s = timeout_s
        return remote

    def _published_host_keys(self, endpoint: Endpoint | None, host: str) -> PublishedHostKeys | None:
        """The guest-attribute host keys of the endpoint's node, when SSH goes to that node's address."""
        if endpoint is None or not endpoint.node or not endpoint.zone:
            return None
        if urlsplit(endpoint.url).hostname != host:
            return None
        zone, node = endpoint.zone, endpoint.node
        return PublishedHostKeys(f"{node} ({zone})", lambda: self.tpu.host_keys(zone, node))

    def container(
        self, host: str | None = None, *, timeout_s: float | None = None
    ) -> tuple[VllmContainer, RemoteHost]:
        """The vLLM container on the TPU VM (at `host`, else as `remote` chooses), and its SSH connection
        (close it when done); `timeout_s` bounds its connect and each command (None: `RemoteHost`'s
        defaults)."""
        remote = self.remote(host, timeout_s=timeout_s)
        return VllmContainer(remote, self.settings.vllm_container), remote

    def vllm_spec(self) -> VllmSpec:
        """How `/vllm start` runs the container, from the settings."""
        s = self.settings
        return VllmSpec(
            image=s.vllm_image,
            model=s.vllm_model,
            tensor_parallel_size=s.vllm_tensor_parallel_size,
            max_model_len=s.vllm_max_model_len,
            port=s.vllm_port,
            hf_token_secret=s.hf_token_secret,
            api_key_secret=s.vllm_api_key_secret,
            project=s.gcp_project,
        )

    def log_entries(self, query: str, limit: int) -> list[LogEntry]:
        """Up to `limit` Cloud Logging entries of the project matching `query`, newest first.

        Args:
            query: a Logging query with a time bound (`ops.gcp.cloudlogs.build_filter`).

        Raises:
            What `ops.gcp.cloudlogs.fetch` raises (BadInput for a query it refuses, OpsError for the API).
        """
        s = self.settings
        return list(cloudlogs.fetch(s.gcp_project, query, limit=limit, api_endpoint=s.google_api_endpoint))

    def _api_key(self) -> str | None:
        """VLLM_API_KEY, else the key in Secret Manager secret VLLM_API_KEY_SECRET (the one the VM reads),
        read once per process; None when neither is set.

        Raises:
            OpsError: the secret cannot be read (as `SecretStore.access` raises).
        """
        key = self.settings.vllm_api_key
        if key:
            return key.get_secret_value()
        secret = self.settings.vllm_api_key_secret
        if not secret:
            return None
        with _API_KEY_LOCK:
            if self._secret_api_key is None:
                self._secret_api_key = self.secrets.access(secret).strip()
            return self._secret_api_key


@dataclass
class Fleet:
    """The bot's deployments, their backends and the channels bound to them.

    Args:
        services: deployment name -> its Services, in configuration order (the first is the one a
            read-only command uses when nothing chooses).
        channels: channel id -> deployment name.
    """

    services: dict[str, Services]
    channels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings, build: Callable[[Settings], Services]) -> Fleet:
        """One deployment `default` from the environment, or the deployments of DEPLOYMENTS_FILE.

        Args:
            settings: the environment's settings (already validated, file included).
            build: makes the Services of one deployment's Settings (e.g. `Services.from_settings`).
        """
        if not settings.deployments_file:
            return cls({DEFAULT: build(settings)})
        services: dict[str, Services] = {}
        channels: dict[str, str] = {}
        for deployment in read_deployments(settings.deployments_file):
            services[deployment.name] = build(settings_for(settings, deployment))
            channels.update(dict.fromkeys(deployment.channels, deployment.name))
        return cls(services, channels)

    @property
    def names(self) -> list[str]:
        """Deployment names in configuration order."""
        return list(self.services)

    @property
    def first(self) -> Services:
        """The first deployment's Services."""
        return next(iter(self.services.values()))

    def bound(self, channel_id: str) -> str | None:
        """The deployment bound to `channel_id`, or None."""
        return self.channels.get(channel_id)

    def bound_channels(self) -> dict[str, list[str]]:
        """Each deployment's name -> the channels bound to it, in configuration order (what help shows)."""
        return {name: [c for c, owner in self.channels.items() if owner == name] for name in self.services}

    def choose(self, name: str | None, channel_id: str, *, changes: bool) -> tuple[str, Services]:
        """The deployment a command acts on: `--deployment NAME`, else the channel's, else the only one.

        With several deployments and neither, a read-only command gets the first one; a command that
        `changes` infrastructure is refused (a guess could touch the wrong project).

        Returns:
            (deployment name, its Services).

        Raises:
            BadInput: an unknown name, or an ambiguous change; the message lists the deployments.
        """
        listing = ", ".join(f"`{n}`" for n in self.services)
        if name is not None:
            if name not in self.services:
                raise BadInput(f"unknown deployment `{name}`", f"deployments: {listing}")
            return name, self.services[name]
        bound = self.bound(channel_id)
        if bound is not None:
            return bound, self.services[bound]
        if len(self.services) == 1 or not changes:
            return next(iter(self.services.items()))
        raise BadInput(
            "this changes infrastructure and this channel is bound to no deployment: which one?",
            f"add `--deployment NAME`, one of {listing}, or run it in a bound channel",
        )


def settled(future: Future[T], what: str = "source") -> T | OpsError:
    """A source fetched concurrently for a reply (`/tpu status`, `/fleet`, `/tpu cost --today`): the future's
    value, or the OpsError it raised, so one failing source is one red line and the rest of the reply still
    shows; any other exception is logged (as "`what` failed") and becomes a generic OpsError pointing at the
    logs. Waits for the future."""
    try:
        return future.result()
    except OpsError as exc:
        return exc
    except Exception:
        log.exception("%s failed", what)
        return OpsError("internal error while fetching this source", "see the bot's logs")


def answered(health: HealthCheck | OpsError) -> bool:
    """Whether something answered on the port (`/health` got an HTTP status, whatever it was)."""
    return isinstance(health, HealthCheck) and health.status is not None


def identify(
    services: Services,
    client: VllmClient,
    endpoint: Endpoint,
    health: HealthCheck | OpsError,
    *,
    container: ContainerStatus | None = None,
    log: str | None = None,
    models: list[ModelCard] | OpsError | None = None,
    metrics_text: str | None = None,
) -> ServerIdentity:
    """Who answers on the vLLM port: the identity verdict of the server at `endpoint`, from the facts
    `ops.vllm.server.server_identity` compares, gathered for one deployment (the container over SSH,
    `/v1/models` and `/metrics` over HTTP), for `/vllm status`, `/vllm health`, `/tpu status` and the vLLM
    watcher. A source that cannot be read leaves its check out; an unreadable container makes the verdict
    "unknown", never "same".

    Args:
        services: the deployment's backends (SSH to its TPU VM).
        client: a vLLM client of `endpoint`.
        health: its `/health` answer (nothing answered: the verdict is "silent", nothing else is read).
        container, log: the container's docker state and log when the caller already read them (else read
            here, the log only for a container that is not running).
        models, metrics_text: `/v1/models` and `/metrics` when the caller already read them.

    Returns:
        ServerIdentity; "unknown" with a note when the container cannot be read (no SSH configured, the
        SSH host is not the endpoint's host, or SSH failed).
    """
    url = urlsplit(endpoint.url)
    port = url.port
    if not answered(health):
        return server_identity(container, answered=False, port=port)
    if isinstance(health, HealthCheck) and health.state == "not-vllm":
        return server_identity(
            None, answered=True, port=port, note="not a vLLM server: no container to compare"
        )
    ssh_host = services.settings.ssh_host
    if ssh_host and ssh_host != url.hostname:
        note = f"SSH_HOST {ssh_host} is not the endpoint's host {url.hostname}"
        return server_identity(None, answered=True, port=port, note=note)
    try:
        if container is None:
            box, host = services.container()
            with host:
                container = box.status()
                if container.exists and not container.running:
                    log = box.logs(tail=200)
    except OpsError as exc:
        return server_identity(None, answered=True, port=port, note=f"the container: {exc.message}")
    return server_identity(
        container,
        answered=True,
        port=port,
        served=_served(client, models),
        server_started=_started(client, metrics_text),
        exit_reason=exit_reason(log or "") if not container.running else "",
    )


def _served(client: VllmClient, models: list[ModelCard] | OpsError | None) -> tuple[str, ...]:
    if models is None:
        try:
            models = client.models()
        except OpsError:
            return ()
    return () if isinstance(models, OpsError) else tuple(card.id for card in models)


def _started(client: VllmClient, metrics_text: str | None) -> datetime | None:
    if metrics_text is None:
        try:
            metrics_text = client.metrics_text()
        except OpsError:
            return None
    return server_start_time(metrics_text)
