"""Who answers on the vLLM port: the facts `ops.vllm.server.server_identity` compares, gathered for one
deployment
(the container over SSH, `/v1/models` and `/metrics` over HTTP), for `/vllm status`, `/vllm health`,
`/tpu status` and the vLLM watcher. A source that cannot be read leaves its check out; an unreadable
container makes the verdict "unknown", never "same"."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlsplit

from bot.services import Services
from ops.errors import OpsError
from ops.vllm.container import ContainerStatus, exit_reason
from ops.vllm.endpoint import Endpoint
from ops.vllm.server import (
    HealthCheck,
    ModelCard,
    ServerIdentity,
    VllmClient,
    server_identity,
    server_start_time,
)


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
    """The identity verdict of the server at `endpoint` (see `ops.vllm.server.server_identity`).

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
