"""Settings, read once at start-up from the environment and `.env` (pydantic-settings).

Every field maps to the upper-case environment variable of the same name (`gcp_project` -> `GCP_PROJECT`).
Lists are comma-separated (`TPU_ZONES=us-east5-a,asia-northeast1-b`). Missing or malformed settings stop
start-up with one line each, naming the setting and its rule, all of them at once (see `load_settings`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from dotenv import dotenv_values
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.deployments import read_deployments
from bot.oncall.settings import CommaList, OncallSettings, split_commas
from bot.slack.request_url import check_request_url
from llm.redact import redact
from ops.diagnosis.families import load_file
from ops.errors import BadInput
from ops.linear import linear
from ops.tpu.model import is_zone, load_key
from ops.vllm.ssh import unit_name

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

SYSLOG_UNITS = (
    "google-startup-scripts.service",  # the startup script that runs vLLM (journalctl -u, per
    # https://cloud.google.com/compute/docs/instances/startup-scripts/linux#viewing-output)
    "docker.service",
    "containerd.service",
    "google-guest-agent.service",
)
"""The journals anyone may read by default: the units that start and run the vLLM container, none that may
log other services' secrets (admins read any unit)."""

# A server's base URL: scheme, host and port, no path (a path such as /v1 is added by the clients).
_BASE_URL = linear(r"^https?://[^\s/]+(:\d+)?/?$")
# Slack user ids (U..., W...) and user-group ids (S...).
_SLACK_PRINCIPAL = linear(r"^[UWS][A-Z0-9]{2,}$")


# Values copied unchanged from .env.example ("xoxb-your-bot-token", "your-project-id", ...).
_PLACEHOLDER = linear(r"(?i)(?:^|[-_])your[-_]|^change[-_]?me$|^<[^>]*>$")
# Databases the state store supports (ops/store/state.py: SQLAlchemy Core on SQLite or PostgreSQL with psycopg
# 3).
SUPPORTED_DATABASES = ("sqlite", "postgresql")


class ConfigError(Exception):
    """Settings are missing or malformed. `problems` holds one line per setting, naming it and its rule;
    `str()` is those lines joined by newlines."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class SlackAppSettings(BaseSettings):
    """How Slack reaches the bot: the settings `python -m bot manifest` reads (no token needed, since the
    manifest comes before the app and its tokens). `Settings` holds them too."""

    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", env_ignore_empty=True
    )

    bot_mode: Literal["http", "socket"] = Field(
        "http",
        description=(
            "How Slack reaches the bot: http (Slack POSTs to /slack/events) or socket (a websocket). "
            "`python -m bot manifest` writes the app manifest for this mode."
        ),
    )
    slack_request_url: str | None = Field(
        None,
        description=(
            "The public URL Slack posts to in http mode, https://HOST/slack/events; `python -m bot "
            "manifest` puts it on every slash command, the event subscriptions and interactivity."
        ),
    )

    @field_validator("*", mode="before")
    @classmethod
    def _not_a_placeholder(cls, value: object) -> object:
        if isinstance(value, str) and _PLACEHOLDER.search(value):
            raise ValueError("still the placeholder from .env.example; set the real value")
        return value

    @field_validator("slack_request_url")
    @classmethod
    def _check_request_url(cls, url: str | None) -> str | None:
        return None if url is None else check_request_url(url)

    @model_validator(mode="after")
    def _check_url_mode(self) -> SlackAppSettings:
        if self.bot_mode == "socket" and self.slack_request_url is not None:
            raise ValueError(
                "SLACK_REQUEST_URL is set but BOT_MODE=socket: Socket Mode has no request URL. Fix: unset "
                "SLACK_REQUEST_URL, or set BOT_MODE=http"
            )
        return self


class Settings(SlackAppSettings, OncallSettings):
    """All settings of the bot; docs/settings.md (generated from this model) lists each one."""

    # Slack
    slack_bot_token: SecretStr = Field(
        description="Bot token, xoxb-... (OAuth & Permissions, Bot User OAuth Token)."
    )
    slack_signing_secret: SecretStr | None = Field(
        None, description="Signing secret; required in http mode: verifies every HTTP request."
    )
    slack_app_token: SecretStr | None = Field(
        None,
        description=("App-level token, xapp-..., with the connections:write scope; required in socket mode."),
    )
    slack_api_url: str = Field(
        "https://slack.com/api/", description="Slack Web API base URL (the demo points it at the simulator)."
    )
    bot_host: str = Field(
        "0.0.0.0",
        description="Where the HTTP server listens (/slack/events, /healthz, /readyz, /metrics): address.",
    )
    bot_port: int = Field(
        3000,
        ge=1,
        le=65535,
        description="Where the HTTP server listens (/slack/events, /healthz, /readyz, /metrics): port.",
    )
    worker_threads: int = Field(
        16,
        ge=1,
        le=256,
        description="Threads running commands after the ack (all but those that ask the model).",
    )
    model_threads: int = Field(
        4,
        ge=1,
        le=64,
        description=(
            "Threads running commands that ask the model (@gemma-bot questions, /gemma ask, /logs"
            " analyze), so reads never wait behind them."
        ),
    )
    model_questions_per_user: int = Field(
        2,
        ge=1,
        le=64,
        description=(
            "Model questions one user may have running or queued at once; another is answered at "
            "once with a note to wait."
        ),
    )
    cpu_workers: int = Field(
        1,
        ge=1,
        le=16,
        description=(
            "Worker processes for CPU-heavy work (log reading and template mining, charts), so it"
            " never holds the interpreter lock the acks need."
        ),
    )
    metrics_token: SecretStr | None = Field(
        None,
        description=(
            "Bearer token /metrics requires (Authorization: Bearer ...); unset: /metrics answers "
            "only clients on loopback (403 otherwise)."
        ),
    )

    # Google Cloud
    gcp_project: str = Field(pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$", description="GCP project id.")
    tpu_zones: CommaList = Field(
        description="Zones to watch, comma-separated, e.g. us-east5-a,asia-northeast1-b."
    )
    tpu_accelerator_type: str = Field(
        "v6e-8", pattern=r"^v[0-9a-z]+-\d+$", description="Default accelerator type."
    )
    tpu_runtime_version: str = Field(
        "v2-alpha-tpuv6e", pattern=r"^[a-z0-9][a-z0-9.-]{0,62}$", description="Default TPU runtime version."
    )
    tpu_primary: str = Field(
        "gemma4-qr",
        pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$",
        description="The queued resource /tpu ensure keeps and endpoint discovery prefers.",
    )
    tpu_service_account: str | None = Field(
        None,
        description=(
            "Service account of created TPU VMs (needs Secret Manager access to the Hugging Face token)."
        ),
    )
    google_timeout_s: float = Field(
        15.0, gt=0, le=300, description="Timeout of one Google API call, seconds (a 429/5xx is retried once)."
    )
    capacity_poll_s: float = Field(
        5.0, gt=0, le=300, description="How often /tpu find polls request states, seconds."
    )
    google_api_endpoint: str | None = Field(
        None, description="Google API endpoint override, for the local emulator only; unset in production."
    )
    operation_lease_ttl_s: float = Field(
        120.0,
        ge=2,
        le=3600,
        description=(
            "How long a stopped bot's hold on a name (create, find, delete, reset) lasts before "
            "another replica or a restart may take it; renewed every third of it while the "
            "operation runs, seconds."
        ),
    )
    reconcile_interval_s: float = Field(
        60.0,
        ge=1,
        le=3600,
        description=(
            "How often the replica holding the reconcile lease settles creates whose command "
            "ended: a search's request that appeared after an ambiguous answer (timeout, lost or "
            "duplicated answer) is deleted by its label, a /tpu create's is kept, and the "
            "command's last message is edited to say so, seconds."
        ),
    )
    ambiguous_create_watch_s: float = Field(
        3600.0,
        ge=60,
        le=7 * 86400,
        description=(
            "How long a create never answered is looked for after it was sent; then it is taken "
            "as never made, seconds."
        ),
    )
    google_credentials_file: str | None = Field(
        None,
        description=(
            "Service-account key file used for this project's Google APIs (per deployment: "
            "credentials_file); unset: Application Default Credentials."
        ),
    )
    logging_reads_per_min: int = Field(
        60,
        ge=1,
        le=10000,
        description=(
            "Cloud Logging entries.list quota per minute per project; /logs analyze paces its reads to it."
        ),
    )
    logs_read_deadline_s: float = Field(
        12.0,
        gt=0,
        le=600,
        description=(
            "How long /logs analyze reads before answering with what it has, labelled partial, seconds."
        ),
    )
    price_max_age_days: int = Field(
        90,
        ge=1,
        le=3650,
        description=(
            "A price of the table (ops/cost/prices.yaml) read longer ago than this many days is "
            "flagged as old beside its date."
        ),
    )
    capacity_parallel: int = Field(
        3,
        ge=1,
        le=16,
        description=(
            "Zones /tpu find requests in at once when --parallel is not given; its preview shows "
            "the worst-case $/h if all turn ACTIVE together."
        ),
    )

    # vLLM
    vllm_base_url: str | None = Field(
        None, description="vLLM URL (no /v1); unset: discovered from the ACTIVE queued resource's node."
    )
    vllm_port: int = Field(8000, ge=1, le=65535, description="vLLM port on the TPU VM, for discovery.")
    vllm_model: str = Field("google/gemma-4-31B-it", description="Served model name.")
    vllm_image: str = Field(
        "vllm/vllm-tpu:gemma4", description="Container image for /tpu create and /vllm start."
    )
    vllm_tensor_parallel_size: int = Field(8, ge=1, le=256, description="vLLM --tensor-parallel-size.")
    vllm_max_model_len: int = Field(16384, ge=256, le=1048576, description="vLLM --max-model-len, tokens.")
    hf_token_secret: str = Field(
        "hf-token",
        pattern=r"^[A-Za-z0-9_-]{1,255}$",
        description="Secret Manager secret holding the Hugging Face token (read on the VM).",
    )
    vllm_api_key: SecretStr | None = Field(None, description="The server's --api-key, if any.")
    http_timeout_s: float = Field(10.0, gt=0, le=300, description="Timeout of calls to vLLM, seconds.")
    vllm_startup_stuck_s: float = Field(
        1800.0,
        ge=60,
        le=86400,
        description=(
            "A vLLM container up this long without answering on its port is 'start-up stuck', not"
            " 'starting', seconds."
        ),
    )
    vllm_replace_settle_s: float = Field(
        30.0,
        ge=0,
        le=600,
        description=(
            "How long the new container of /vllm restart must keep running before the old one is "
            "removed (vLLM binds its port and reads its flags in its first seconds), seconds."
        ),
    )
    fault_catalogue_file: str | None = Field(
        None,
        description=(
            "A team's own failure families and runbooks (YAML, the format of ops/diagnosis/faults.yaml), "
            "matched beside the built-in catalogue."
        ),
    )
    vllm_use_internal_ip: bool = Field(
        False,
        description="Reach vLLM at the node's internal IP (the bot runs inside the VPC; docs/deploy.md).",
    )
    vllm_api_key_secret: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_-]{1,255}$",
        description=(
            "Secret Manager secret holding the vLLM API key: the VM reads it into VLLM_API_KEY "
            "(startup script, /vllm start|restart) and the bot reads it to send it; VLLM_API_KEY,"
            " if set, wins on the bot's side."
        ),
    )
    llm_fallback_base_url: str | None = Field(
        None,
        description=(
            "An OpenAI-compatible server (no /v1; vLLM, llama.cpp, ...) asked when the primary "
            "vLLM does not answer; unset: rules only then."
        ),
    )
    llm_fallback_model: str | None = Field(
        None, description="The fallback's model name; unset: the first of its /v1/models."
    )
    llm_fallback_api_key: SecretStr | None = Field(None, description="Bearer token of the fallback server.")
    llm_context_tokens: int | None = Field(
        None,
        ge=512,
        le=1048576,
        description=(
            "Context size for prompts when the server reports no max_model_len in /v1/models; unset: 2048."
        ),
    )
    llm_timeout_s: float = Field(
        120.0,
        gt=0,
        le=900,
        description=(
            "Timeout of one model answer (@gemma-bot, /logs analyze), seconds; HTTP_TIMEOUT_S "
            "bounds the /v1/models check."
        ),
    )
    llm_answer_tokens: int = Field(
        768,
        ge=1,
        le=32768,
        description=(
            "Most tokens of a model answer in @gemma-bot and /logs analyze (at most a quarter of "
            "the context)."
        ),
    )

    # SSH to the TPU VM (container control). Host keys are always checked: known_hosts, pinned keys, and the
    # guest attributes of a node the bot made or the primary (docs/ssh.md).
    ssh_host: str | None = Field(
        None, description="SSH target, the TPU VM's address; unset: the vLLM endpoint's host."
    )
    ssh_port: int = Field(22, ge=1, le=65535, description="SSH port of the TPU VM.")
    ssh_user: str = Field(
        "tpu-chatops",
        pattern=r"^[a-z_][a-z0-9_-]{0,31}$",
        description=(
            "SSH user on the TPU VM; the nodes the bot creates get it, with the bot's public key, in "
            "their ssh-keys metadata."
        ),
    )
    ssh_key_path: str | None = Field(
        None,
        description=(
            "The bot's private SSH key, unencrypted (required for /vllm status|logs|start|...; docs/ssh.md)."
        ),
    )
    ssh_known_hosts_path: str | None = Field(
        None, description="Trusted host keys: an OpenSSH known_hosts file with the VM's host key."
    )
    ssh_host_keys: CommaList = Field(
        default_factory=list,
        description='Trusted host keys: pinned keys, "TYPE BASE64" each, e.g. "ssh-ed25519 AAAA...".',
    )
    ssh_sudo: bool = Field(False, description="Run docker and journalctl with sudo -n on the VM.")
    syslog_units: CommaList = Field(
        default_factory=lambda: list(SYSLOG_UNITS),
        description=(
            "Journal units anyone may read with /vllm syslog (a bare name is a .service); admins "
            "may read any unit."
        ),
    )
    vllm_container: str = Field(
        "vllm-gemma4",
        pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$",
        description=(
            "The vLLM container's name on the VM (the startup script names it; /vllm "
            "status|logs|restart act on it)."
        ),
    )

    # Access control: Slack user ids (U.../W...) and user-group ids (S...).
    viewers: CommaList = Field(
        default_factory=list,
        description=(
            "Slack user ids (U...) and user-group ids (S...) with the viewer role; empty: every "
            "member may read."
        ),
    )
    operators: CommaList = Field(
        default_factory=list,
        description=(
            "Slack user ids (U...) and user-group ids (S...) with the operator role (includes viewer)."
        ),
    )
    admins: CommaList = Field(
        default_factory=list,
        description=(
            "Slack user ids (U...) and user-group ids (S...) with the admin role (includes "
            "operator and viewer)."
        ),
    )

    confirmation_ttl_s: int = Field(
        300, ge=30, le=3600, description="How long a Confirm button works, seconds."
    )

    state_database_url: str = Field(
        "sqlite:///tpu-chatops.db",
        description=(
            "SQLAlchemy URL of the state store (audit trail, confirmations, zone memory, "
            "benchmark results, alerts, leases); postgresql+psycopg://user:pass@host/db for "
            "several replicas."
        ),
    )

    production: bool | None = Field(
        None,
        description=(
            "This run is production: a SQLite state store (a file or memory, lost with the instance and "
            "not shared between replicas) is refused unless ALLOW_LOCAL_STORE=true. Unset: production when "
            "the platform says so in the environment, K_SERVICE (Cloud Run) or KUBERNETES_SERVICE_HOST "
            "(Kubernetes)."
        ),
    )
    allow_local_store: bool = Field(
        False,
        description=(
            "Keep a SQLite STATE_DATABASE_URL in production anyway: one replica whose file outlives "
            "restarts (e.g. on a Kubernetes PersistentVolume)."
        ),
    )

    # Fleet: several deployments, each bound to its channels (bot/deployments.py).
    deployments_file: str | None = Field(
        None,
        description=(
            "YAML file of several deployments, each bound to its channels (docs/operations.md, "
            "Several deployments); unset: the settings above are deployment `default`."
        ),
    )
    history_interval_s: float = Field(
        60.0,
        ge=5,
        le=3600,
        description=(
            "How often each deployment's vLLM metrics are sampled into the state store (kept 7 "
            "days; older than a day thinned to one per 10 minutes), seconds."
        ),
    )

    @field_validator("slack_bot_token")
    @classmethod
    def _check_bot_token(cls, token: SecretStr) -> SecretStr:
        value = token.get_secret_value()
        if not value.startswith("xoxb-") or any(c.isspace() for c in value):
            got = value.split("-", 1)[0] + "-" if "-" in value else "something else"
            raise ValueError(
                f"a bot token starts with xoxb- (OAuth & Permissions, Bot User OAuth Token); this is {got}"
            )
        return token

    @field_validator("slack_app_token")
    @classmethod
    def _check_app_token(cls, token: SecretStr | None) -> SecretStr | None:
        if token is not None and not token.get_secret_value().startswith("xapp-"):
            raise ValueError("an app-level token starts with xapp- (Basic Information, App-Level Tokens)")
        return token

    @field_validator("slack_signing_secret")
    @classmethod
    def _check_signing_secret(cls, secret: SecretStr | None) -> SecretStr | None:
        value = secret.get_secret_value() if secret is not None else ""
        if value.startswith(("xox", "xapp-")) or any(c.isspace() for c in value):
            raise ValueError("this is a token, not the signing secret (Basic Information, App Credentials)")
        return secret

    @field_validator("ssh_key_path")
    @classmethod
    def _check_ssh_key(cls, path: str | None) -> str | None:
        if path is not None:
            try:
                load_key(path)
            except BadInput as exc:
                raise ValueError(f"{exc.message} ({exc.hint})") from None
        return path

    @field_validator("ssh_host_keys")
    @classmethod
    def _check_host_keys(cls, keys: list[str]) -> list[str]:
        bad = [key for key in keys if len(key.split()) != 2 or not key.startswith(("ssh-", "ecdsa-"))]
        if bad:
            raise ValueError('each pinned key is "TYPE BASE64", e.g. "ssh-ed25519 AAAAC3..."')
        return keys

    @field_validator("syslog_units")
    @classmethod
    def _check_units(cls, units: list[str]) -> list[str]:
        try:
            return [unit_name(unit) for unit in units]
        except BadInput as exc:
            raise ValueError(exc.message) from None

    @field_validator("google_credentials_file")
    @classmethod
    def _check_credentials_file(cls, path: str | None) -> str | None:
        if path is not None and not Path(path).is_file():
            raise ValueError(f"{path} is no file (give a service-account JSON key)")
        return path

    @field_validator("deployments_file")
    @classmethod
    def _check_deployments(cls, path: str | None) -> str | None:
        if path is not None:
            read_deployments(path)
        return path

    @field_validator(
        "tpu_zones",
        "viewers",
        "operators",
        "admins",
        "ssh_host_keys",
        "syslog_units",
        mode="before",
    )
    @classmethod
    def _split_commas(cls, value: object) -> object:
        return split_commas(value)

    @field_validator("tpu_zones")
    @classmethod
    def _check_zones(cls, zones: list[str]) -> list[str]:
        if not zones:
            raise ValueError("give at least one zone, e.g. us-east5-a")
        bad = [zone for zone in zones if not is_zone(zone)]
        if bad:
            raise ValueError(f"not a zone name: {', '.join(bad)} (expected e.g. us-east5-a)")
        return zones

    @field_validator("viewers", "operators", "admins")
    @classmethod
    def _check_principals(cls, ids: list[str]) -> list[str]:
        bad = [item for item in ids if not _SLACK_PRINCIPAL.match(item)]
        if bad:
            raise ValueError(f"not a Slack user or user-group id: {', '.join(bad)}")
        return ids

    @field_validator("vllm_base_url", "google_api_endpoint", "llm_fallback_base_url")
    @classmethod
    def _check_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        if not _BASE_URL.match(url):
            raise ValueError(f"not a base URL: {url!r} (expected e.g. http://10.0.0.5:8000)")
        return url.rstrip("/")

    @field_validator("fault_catalogue_file")
    @classmethod
    def _check_catalogue(cls, path: str | None) -> str | None:
        if path is not None:
            load_file(path)  # ValueError: one line naming the file, the family and the problem
        return path

    @field_validator("state_database_url")
    @classmethod
    def _check_db_url(cls, url: str) -> str:
        backend = _database_url(url).get_backend_name()
        if backend not in SUPPORTED_DATABASES:
            raise ValueError(
                f"{backend} is not supported: use sqlite:///FILE or postgresql+psycopg://USER:$PASSWORD@HOST/DB"
            )
        return url

    @model_validator(mode="after")
    def _check_mode(self) -> Settings:
        if self.bot_mode == "http" and self.slack_signing_secret is None:
            raise ValueError("SLACK_SIGNING_SECRET is required when BOT_MODE=http")
        if self.bot_mode == "socket" and self.slack_app_token is None:
            raise ValueError("SLACK_APP_TOKEN is required when BOT_MODE=socket")
        if self.bot_mode == "http" and self.slack_app_token is not None:
            # A bot that serves HTTP while the app sends its events down a Socket Mode websocket says ready
            # and never receives one: the app-level token is the sign of a Socket Mode app.
            raise ValueError(
                "SLACK_APP_TOKEN is set but BOT_MODE=http: an app-level token (xapp-) is only for Socket "
                "Mode. Fix: for HTTP mode unset SLACK_APP_TOKEN (the app's manifest: python -m bot manifest "
                "--url https://HOST/slack/events); for Socket Mode set BOT_MODE=socket (the app's manifest: "
                "BOT_MODE=socket python -m bot manifest)"
            )
        return self

    @model_validator(mode="after")
    def _check_local_store(self) -> Settings:
        problem = local_store_problem(
            self.state_database_url, self.production, self.allow_local_store, os.environ
        )
        if problem is not None:
            raise ValueError(problem)
        return self


def _database_url(url: str) -> URL:
    """STATE_DATABASE_URL parsed by SQLAlchemy (`sqlalchemy.engine.make_url`).

    SQLAlchemy is imported here, on the first check of a full `Settings`, so that commands reading only the
    Slack app's settings (`python -m bot manifest`) start without it (about 0.15 s of imports).

    Raises:
        ValueError: not a SQLAlchemy URL.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url)
    except ArgumentError as exc:
        raise ValueError("not a SQLAlchemy URL (e.g. sqlite:///tpu-chatops.db)") from exc


# Environment variables the platforms set themselves, each meaning "this is production" (docs/deploy.md):
# Cloud Run sets K_SERVICE to the service's name in every container
# (https://cloud.google.com/run/docs/container-contract#env-vars), Kubernetes sets KUBERNETES_SERVICE_HOST in
# every pod (https://kubernetes.io/docs/concepts/services-networking/service/#environment-variables).
PRODUCTION_SIGNALS = (("K_SERVICE", "Cloud Run"), ("KUBERNETES_SERVICE_HOST", "Kubernetes"))


def local_store_problem(
    url: str, production: bool | None, allow: bool, environ: Mapping[str, str]
) -> str | None:
    """Why a SQLite state store is refused here (one line: why, what to set), or None when it is allowed.

    Args:
        url: STATE_DATABASE_URL, a valid SQLAlchemy URL. production, allow: PRODUCTION (None: decided by
            `environ` and PRODUCTION_SIGNALS) and ALLOW_LOCAL_STORE. environ: the process environment.
    """
    parsed = _database_url(url)
    if parsed.get_backend_name() != "sqlite" or allow or production is False:
        return None
    signals = [
        f"{name}={environ[name]} is set ({where})" for name, where in PRODUCTION_SIGNALS if environ.get(name)
    ]
    signal = "PRODUCTION=true" if production else (signals[0] if signals else None)
    if signal is None:
        return None
    where = "in memory" if parsed.database in (None, "", ":memory:") else f"in the file {parsed.database}"
    return (
        f"STATE_DATABASE_URL is a SQLite store {where}, but this is production ({signal}): it is lost when "
        "the instance stops and is not shared between replicas (Slack events and alerts would be handled "
        "twice); set STATE_DATABASE_URL=postgresql+psycopg://USER:PASSWORD@HOST/DB (docs/deploy.md), or "
        "ALLOW_LOCAL_STORE=true to keep it (one replica whose disk outlives restarts)"
    )


_Model = TypeVar("_Model", bound=SlackAppSettings)


def load_settings(**overrides: object) -> Settings:
    """Read Settings from the environment and `.env`, with `overrides` taking precedence.

    Returns:
        The validated Settings.

    Raises:
        ConfigError: one line per bad setting, all of them, e.g. "GCP_PROJECT: required but not set". No
            line shows a secret: the value of a secret setting (a token, key, password or secret by its
            name) is never quoted, the values given to secret settings are masked wherever they appear, and
            every line is redacted (`llm.redact`: a URL's password, a token in a known format).
    """
    return _load(Settings, overrides)


def load_slack_app_settings(**overrides: object) -> SlackAppSettings:
    """Read only BOT_MODE and SLACK_REQUEST_URL (environment, `.env`, then `overrides`), as
    `python -m bot manifest` does before the app and its tokens exist.

    Returns:
        The validated SlackAppSettings.

    Raises:
        ConfigError: as `load_settings`, e.g. "SLACK_REQUEST_URL: 'http://x/slack/events' is not an
            https:// URL with a host (e.g. https://HOST/slack/events)".
    """
    return _load(SlackAppSettings, overrides)


def _load(model: type[_Model], overrides: dict[str, object]) -> _Model:
    try:
        return model(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        secrets = _secret_values(overrides)
        problems = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            where = "_".join(str(part) for part in error["loc"]).upper()
            message = str(error["msg"]).removeprefix("Value error, ")
            if error["type"] == "missing":
                message = "required but not set"
            elif error["type"] == "string_pattern_mismatch":
                rule = error.get("ctx", {}).get("pattern", "")
                shown = "the value given" if _holds_secret(field) else repr(error["input"])
                message = f"{shown} is not a valid value (rule: {rule}; see docs/settings.md)"
            message = _unsecret(message, secrets)
            line = f"{where}: {message}" if where else message
            if line not in problems:
                problems.append(line)
        raise ConfigError(problems) from None


# Setting names that hold (or, mistyped, may hold) a credential: their values are never quoted in errors.
_SECRET_WORDS = ("token", "secret", "password", "key")


def _holds_secret(field: str) -> bool:
    annotation = str(Settings.model_fields[field].annotation) if field in Settings.model_fields else ""
    return "SecretStr" in annotation or any(word in field for word in _SECRET_WORDS)


def _secret_values(overrides: dict[str, Any]) -> list[str]:
    """The values given to secret settings (overrides, the environment, the `.env` file), longest first."""
    env_file = overrides.get("_env_file", Settings.model_config.get("env_file"))
    readable = isinstance(env_file, str | Path) and Path(env_file).is_file()
    from_file = dotenv_values(env_file) if readable else {}
    values: set[str] = set()
    for name in Settings.model_fields:
        if not _holds_secret(name):
            continue
        for value in (overrides.get(name), os.environ.get(name.upper()), from_file.get(name.upper())):
            text = value.get_secret_value() if isinstance(value, SecretStr) else value
            if isinstance(text, str) and len(text.strip()) >= 4:
                values.add(text.strip())
    return sorted(values, key=len, reverse=True)


def _unsecret(line: str, secrets: list[str]) -> str:
    for value in secrets:
        line = line.replace(value, "[REDACTED:setting]")
    return redact(line)


def masked(secret: SecretStr | None) -> str:
    """Show a secret as set or unset without revealing it: "xoxb-…(set)" keeps only a known prefix."""
    if secret is None:
        return "(unset)"
    value = secret.get_secret_value()
    prefix = value.split("-", 1)[0] if value.startswith(("xoxb-", "xapp-", "xoxp-")) else ""
    return f"{prefix}-…(set)" if prefix else "…(set)"
