"""The backends a command may use, built once from Settings (so tests and the demo only change endpoints)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.config import Settings
from llm.client import GemmaClient
from ops.endpoint import Endpoint, EndpointResolver
from ops.secrets import SecretStore
from ops.store import Store
from ops.tpu import TpuOps
from ops.vllm import VllmClient


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

    @classmethod
    def from_settings(cls, settings: Settings) -> Services:
        tpu = TpuOps(settings.gcp_project, api_endpoint=settings.google_api_endpoint)
        endpoints = EndpointResolver(
            settings.vllm_base_url, tpu, settings.tpu_zones, settings.vllm_port, primary=settings.tpu_primary
        )
        store = Store(settings.state_database_url)
        secrets = SecretStore(settings.gcp_project, api_endpoint=settings.google_api_endpoint)
        return cls(settings=settings, tpu=tpu, endpoints=endpoints, store=store, secrets=secrets)

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

    def _api_key(self) -> str | None:
        key = self.settings.vllm_api_key
        return key.get_secret_value() if key else None
