"""The backends a command may use, built once from Settings (so tests and the demo only change endpoints)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit

from bot.config import Settings
from bot.workers import CpuWorkers
from llm.client import GemmaClient
from ops.endpoint import Endpoint, EndpointResolver
from ops.errors import BadInput
from ops.remote import RemoteHost, VllmContainer, VllmSpec
from ops.secrets import SecretStore
from ops.store import Store
from ops.tpu import TpuOps
from ops.vllm import VllmClient

FANOUT_PER_WORKER = 4
"""Fan-out threads per command worker thread (/tpu status runs 4 sources at once)."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Services:
    """Backends for handlers. `vllm()` and `gemma()` resolve the endpoint on each call (it can move)."""

    settings: Settings
    tpu: TpuOps
    endpoints: EndpointResolver
    store: Store
    secrets: SecretStore
    now: Callable[[], datetime] = _utcnow
    workers: CpuWorkers = field(default_factory=CpuWorkers)
    # Shared threads for a command's concurrent backend calls (e.g. /tpu status's sources). A pool per
    # command would start threads during a burst, and every thread start holds a lock that all
    # ThreadPoolExecutor.submit calls of the process take, the ack path's included.
    fanout: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(FANOUT_PER_WORKER, thread_name_prefix="fanout")
    )

    @classmethod
    def from_settings(cls, settings: Settings) -> Services:
        # One library retry of a 429/5xx keeps a failing Google call within about 2 x GOOGLE_TIMEOUT_S.
        tpu = TpuOps(
            settings.gcp_project,
            api_endpoint=settings.google_api_endpoint,
            timeout_s=settings.google_timeout_s,
            num_retries=1,
            # Each listing sends two calls per zone at once; leave room for every worker to list together.
            max_workers=min(256, 2 * len(settings.tpu_zones) * settings.worker_threads),
        )
        endpoints = EndpointResolver(
            settings.vllm_base_url, tpu, settings.tpu_zones, settings.vllm_port, primary=settings.tpu_primary
        )
        store = Store(settings.state_database_url)
        secrets = SecretStore(settings.gcp_project, api_endpoint=settings.google_api_endpoint)
        return cls(
            settings=settings,
            tpu=tpu,
            endpoints=endpoints,
            store=store,
            secrets=secrets,
            workers=CpuWorkers(settings.cpu_workers),
            fanout=ThreadPoolExecutor(
                FANOUT_PER_WORKER * settings.worker_threads, thread_name_prefix="fanout"
            ),
        )

    def vllm(self) -> tuple[VllmClient, Endpoint]:
        """A vLLM client for the current endpoint, and that endpoint. Raises what `resolve()` raises."""
        endpoint = self.endpoints.resolve()
        return self.vllm_at(endpoint), endpoint

    def vllm_at(self, endpoint: Endpoint) -> VllmClient:
        """A vLLM client for a known endpoint (close it, or use it as a context manager)."""
        return VllmClient(endpoint.url, api_key=self._api_key(), timeout_s=self.settings.http_timeout_s)

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

    def remote(self) -> RemoteHost:
        """An SSH connection to the TPU VM (SSH_HOST, else the vLLM endpoint's host), host key checked.

        Raises:
            BadInput: no SSH key or no trusted host key is configured. What `resolve()` raises.
        """
        s = self.settings
        host = s.ssh_host or urlsplit(self.endpoints.resolve().url).hostname or ""
        if not s.ssh_key_path:
            raise BadInput("SSH is not configured: SSH_KEY_PATH is unset", "see README.md, Settings (SSH)")
        pinned = dict(key.split(maxsplit=1) for key in s.ssh_host_keys)
        return RemoteHost(
            host,
            s.ssh_port,
            user=s.ssh_user,
            key_path=s.ssh_key_path,
            known_hosts_path=s.ssh_known_hosts_path,
            pinned_host_keys=pinned,
            sudo=s.ssh_sudo,
        )

    def container(self) -> tuple[VllmContainer, RemoteHost]:
        """The vLLM container on the TPU VM, and its SSH connection (close it when done)."""
        remote = self.remote()
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
        )

    def _api_key(self) -> str | None:
        key = self.settings.vllm_api_key
        return key.get_secret_value() if key else None
