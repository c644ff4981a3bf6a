"""The one place Google API clients are built, and the one place their errors are mapped.

Everything else asks this module for a client (Cloud TPU v2alpha1 and v2, Cloud Quotas, Secret Manager,
Cloud Logging),
so pointing the whole bot at the local simulator (`sim.gcp.GcpSimulator`) only changes `api_endpoint`.
With an endpoint such as "http://127.0.0.1:43121" the clients use `AnonymousCredentials` (unless
credentials are given) and talk plain HTTP to it; with `api_endpoint=None` they use Application Default
Credentials and the real `https://*.googleapis.com/` endpoints.

Every Google call's failure becomes an `ops.errors.OpsError` here: `map_error` for reads of any of these
APIs, `create_error` and `operation_error` for changes to TPU resources (typed by
`ops.diagnosis.zonefit.classify`
when the zone does not offer the request).
"""

from __future__ import annotations

import functools
import http
import json
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

import google.auth
import google_auth_httplib2
import httplib2
import requests
from google.api_core import exceptions as core_exceptions
from google.api_core.client_options import ClientOptions
from google.auth import exceptions as auth_exceptions
from google.auth.credentials import AnonymousCredentials, Credentials
from google.auth.exceptions import DefaultCredentialsError
from google.auth.transport.requests import AuthorizedSession
from google.cloud import cloudquotas_v1, secretmanager_v1
from google.cloud import logging as cloud_logging_lib
from google.cloud import tpu_v2 as gapic_tpu_v2
from googleapiclient import discovery, discovery_cache
from googleapiclient.errors import HttpError

from ops.diagnosis.engine import CreateError, diagnose
from ops.diagnosis.zonefit import classify
from ops.errors import (
    AlreadyExists,
    BackendTimeout,
    BackendUnavailable,
    BadInput,
    Cancelled,
    CapacityUnavailable,
    NotFound,
    OpsError,
    PermissionDenied,
    QuotaExceeded,
    UnsupportedInZone,
)
from ops.gcp import iam
from ops.gcp.iam import CLOUD_PLATFORM_SCOPE
from ops.linear import linear

DEFAULT_TIMEOUT_S = 60.0
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}

_local = threading.local()
# Every thread's httplib2.Http of `tpu_v2alpha1`, by endpoint, for `close_connections`.
_https: weakref.WeakKeyDictionary[httplib2.Http, str | None] = weakref.WeakKeyDictionary()
_https_lock = threading.Lock()
_adc_lock = threading.Lock()
_adc: Credentials | None = None


@functools.cache
def _discovery_doc(service: str, version: str) -> dict[str, Any]:
    """The static discovery document bundled with google-api-python-client, parsed once per process."""
    text = discovery_cache.get_static_doc(service, version)
    if text is None:  # pragma: no cover - the package always ships it
        raise RuntimeError(f"google-api-python-client ships no discovery document for {service} {version}")
    doc: dict[str, Any] = json.loads(text)
    return doc


def _credentials(api_endpoint: str | None, credentials: Credentials | None) -> Credentials:
    """Given credentials, else anonymous ones for an explicit endpoint, else ADC (loaded once)."""
    global _adc
    if credentials is not None:
        return credentials
    if api_endpoint:
        return AnonymousCredentials()
    with _adc_lock:
        if _adc is None:
            try:
                _adc, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
            except DefaultCredentialsError as exc:
                raise PermissionDenied(
                    "Google credentials: no Application Default Credentials found",
                    "run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS",
                    backend="tpu",
                ) from exc
        return _adc


def _is_loopback(api_endpoint: str | None) -> bool:
    return bool(api_endpoint) and urlsplit(str(api_endpoint)).hostname in _LOOPBACK


def tpu_v2alpha1(
    api_endpoint: str | None, credentials: Credentials | None = None, *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Any:
    """A google-api-python-client resource for Cloud TPU API v2alpha1, private to the calling thread.

    Equivalent to `googleapiclient.discovery.build("tpu", "v2alpha1", static_discovery=True,
    cache_discovery=False, ...)`, but the bundled discovery document is read and parsed once per process
    and the resource is cached per (thread, endpoint, credentials, timeout): httplib2 is not thread-safe,
    so never share the returned object between threads (call this function in each thread instead).

    Args:
        api_endpoint: base URL such as "http://127.0.0.1:43121" (the simulator); None for the real API
            (https://tpu.googleapis.com/).
        credentials: google-auth credentials; None means `AnonymousCredentials()` when `api_endpoint` is
            set, else Application Default Credentials with the cloud-platform scope.
        timeout_s: socket timeout of each HTTP request, in seconds.

    Returns:
        A `googleapiclient.discovery.Resource` (e.g. `.projects().locations().queuedResources().list(...)`);
        its requests return plain JSON dicts and raise `googleapiclient.errors.HttpError`.

    Raises:
        PermissionDenied: no credentials given and no Application Default Credentials found.
    """
    cache: dict[tuple[Any, ...], tuple[Any, Any]] = _local.__dict__.setdefault("v2alpha1", {})
    key = (api_endpoint, id(credentials), timeout_s)
    hit = cache.get(key)
    if hit is not None:
        return hit[1]
    creds = _credentials(api_endpoint, credentials)
    # Explicit proxy_info=None for a loopback endpoint: an HTTP(S)_PROXY in the environment must not
    # swallow requests meant for the local simulator.
    if _is_loopback(api_endpoint):
        http = httplib2.Http(timeout=timeout_s, proxy_info=None)
    else:
        http = httplib2.Http(timeout=timeout_s)
    with _https_lock:
        _https[http] = api_endpoint
    resource = discovery.build_from_document(
        _discovery_doc("tpu", "v2alpha1"),
        http=google_auth_httplib2.AuthorizedHttp(creds, http=http),
        client_options=ClientOptions(api_endpoint=api_endpoint) if api_endpoint else None,
    )
    cache[key] = (credentials, resource)  # keeps `credentials` alive so its id() stays unique
    return resource


def close_connections(api_endpoint: str | None) -> None:
    """Close the kept-alive connections of every thread's `tpu_v2alpha1` client of `api_endpoint` (a
    later request reconnects). A thread's cached client outlives the object that used it: without this,
    a thread that stays (the main thread, a restart in the same process) keeps its sockets open. Call it
    when no request to that endpoint is in flight (httplib2.Http is not thread-safe), e.g. at shutdown."""
    with _https_lock:
        kept = [connection for connection, endpoint in _https.items() if endpoint == api_endpoint]
    for connection in kept:
        connection.close()


_Gapic = TypeVar("_Gapic")


def rest_gapic(
    client_class: Callable[..., _Gapic], api_endpoint: str | None, credentials: Credentials | None = None
) -> _Gapic:
    """A GAPIC client of `client_class` using the REST transport (`transport="rest"`).

    Args:
        client_class: e.g. `google.cloud.tpu_v2.TpuClient`, `google.cloud.cloudquotas_v1.CloudQuotasClient`,
            `google.cloud.secretmanager_v1.SecretManagerServiceClient`.
        api_endpoint: base URL with scheme, e.g. "http://127.0.0.1:43121" (the simulator; a bare
            host:port would get https://); None for the real API (the client's default host).
        credentials: as for `tpu_v2alpha1`.

    Returns:
        The client, safe to share between threads (close it with `with client:` or
        `client.transport.close()`); its calls raise `google.api_core.exceptions.GoogleAPICallError`
        subclasses for HTTP errors and `requests` exceptions for connection failures and timeouts.

    Raises:
        PermissionDenied: no credentials given and no Application Default Credentials found.
    """
    creds = _credentials(api_endpoint, credentials)
    options = ClientOptions(api_endpoint=api_endpoint) if api_endpoint else None
    return client_class(transport="rest", credentials=creds, client_options=options)


def tpu_v2(api_endpoint: str | None, credentials: Credentials | None = None) -> gapic_tpu_v2.TpuClient:
    """`rest_gapic` of `google.cloud.tpu_v2.TpuClient` (https://tpu.googleapis.com/).

    The client lacks the flex-start fields (provisioningModel, runDuration, terminationTimestamp): the v2
    protos do not define them. Use `tpu_v2alpha1` to read those. Pass `timeout=` and `retry=` per call."""
    return rest_gapic(gapic_tpu_v2.TpuClient, api_endpoint, credentials)


def cloud_quotas(
    api_endpoint: str | None, credentials: Credentials | None = None
) -> cloudquotas_v1.CloudQuotasClient:
    """`rest_gapic` of `google.cloud.cloudquotas_v1.CloudQuotasClient` (https://cloudquotas.googleapis.com/)."""
    return rest_gapic(cloudquotas_v1.CloudQuotasClient, api_endpoint, credentials)


def secret_manager(
    api_endpoint: str | None, credentials: Credentials | None = None
) -> secretmanager_v1.SecretManagerServiceClient:
    """`rest_gapic` of `google.cloud.secretmanager_v1.SecretManagerServiceClient`
    (https://secretmanager.googleapis.com/)."""
    return rest_gapic(secretmanager_v1.SecretManagerServiceClient, api_endpoint, credentials)


_REFRESH_TIMEOUT_S = 300.0
"""Seconds a credentials refresh may take: google-cloud-core's `_CREDENTIALS_REFRESH_TIMEOUT`, the value the
client would give its own session (google/cloud/client/__init__.py in googleapis/python-cloud-core)."""


class _PacedSession(AuthorizedSession):
    """The `requests` session a `google.cloud.logging.Client` sends its HTTP requests through: google-auth's
    `AuthorizedSession`, as the client builds for itself (google-cloud-core `Client._http`: a 300 s
    credentials refresh timeout, the mTLS channel when GOOGLE_API_USE_CLIENT_CERTIFICATE asks for it), that
    calls `before_request()` first on every request it sends, the retry after a 401 included. Reading
    Cloud Logging needs it: `Client.list_entries` fetches a query's next pages by itself while its entries
    are iterated, so a request can only be paced and counted where it is sent.
    """

    def __init__(
        self, credentials: Credentials, before_request: Callable[[], None], *, loopback: bool
    ) -> None:
        super().__init__(credentials, refresh_timeout=_REFRESH_TIMEOUT_S)
        self._before_request = before_request
        if loopback:
            self.trust_env = False  # never send simulator traffic through a proxy from the environment
        else:
            self.configure_mtls_channel()

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        """`before_request()`, which may wait or raise (then nothing is sent), then the request."""
        self._before_request()
        response: requests.Response = super().request(method, url, *args, **kwargs)
        return response


def cloud_logging(
    project: str,
    api_endpoint: str | None,
    credentials: Credentials | None = None,
    *,
    before_request: Callable[[], None],
) -> cloud_logging_lib.Client:
    """A hand-written `google.cloud.logging.Client` speaking REST/JSON (`_use_grpc=False`).

    Cloud Logging's GAPIC client is gRPC only (docs/google-apis.md §1 item 6); this REST client
    sends `POST /v2/entries:list`, which the simulator (`sim.gcp.GcpSimulator`) serves. Beware that its
    `list_entries` appends `AND timestamp>="<now - 24 h>"` to any filter without the word "timestamp"
    (§1 item 7 there): `ops.gcp.cloudlogs.build_filter` always writes its own bound. Its HTTP requests go
    through a `_PacedSession` given to the constructor as `_http` (documented there as any object with
    `requests.Session.request`'s interface, and "should be considered private", as is `_use_grpc`), which
    calls `before_request` before each (§1 item 9 there).

    Args:
        project: the project id whose logs are read ("projects/<project>" is the default resource name).
        api_endpoint: base URL with scheme, e.g. "http://127.0.0.1:43121" (the simulator); None for the
            real API (https://logging.googleapis.com/).
        credentials: as for `tpu_v2alpha1`. With a loopback endpoint the session ignores HTTP(S)_PROXY
            from the environment.
        before_request: called with no argument before every HTTP request the client sends; it may wait
            (pacing) or raise (nothing is sent; the exception reaches the caller of the client's method,
            or of the generator `list_entries` returned).

    Returns:
        The client; close it with `client.close()` (closes its HTTP session). Its calls raise
        `google.api_core.exceptions.GoogleAPICallError` subclasses for HTTP errors and `requests`
        exceptions for connection failures and timeouts.

    Raises:
        PermissionDenied: no credentials given and no Application Default Credentials found.
    """
    creds = _credentials(api_endpoint, credentials)
    return cloud_logging_lib.Client(
        project=project,
        credentials=creds,
        _http=_PacedSession(creds, before_request, loopback=_is_loopback(api_endpoint)),
        _use_grpc=False,
        client_options={"api_endpoint": api_endpoint} if api_endpoint else None,
    )


MAX_MESSAGE_CHARS = 300
_REQUEST_PREFIX = linear(r"^(?:GET|POST|PUT|PATCH|DELETE) \S+: ")
# google.rpc.Code names (https://github.com/googleapis/googleapis/blob/master/google/rpc/code.proto).
RPC_CODES = {
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    15: "DATA_LOSS",
    16: "UNAUTHENTICATED",
}


# --------------------------------------------------------------------------------------------------
# Error mapping
# --------------------------------------------------------------------------------------------------


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` on one line (whitespace runs collapsed), cut to `limit` characters with a trailing "…"."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _http_phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def _hint_for_status(status: int, api: str = "the TPU API") -> tuple[type[OpsError], str]:
    if status == 404:
        return NotFound, "check the name and the zone" if api == "the TPU API" else "check the name"
    if status in (401, 403):
        roles = "its TPU roles" if api == "the TPU API" else "its roles"
        return PermissionDenied, f"check the bot's credentials and {roles} on the project"
    if status == 429:
        return QuotaExceeded, "a quota or a per-minute limit of the API (HTTP 429): back off, then retry"
    if status == 504:
        return BackendTimeout, f"{api} timed out: retry in a minute"
    if status >= 500:
        return BackendUnavailable, f"{api} is having trouble: retry in a minute"
    if status == 400:
        if api == "Cloud Logging":  # the query itself was refused: its filter, not a zone
            return BadInput, (
                "the query was refused: check the --filter syntax "
                "(https://cloud.google.com/logging/docs/view/logging-query-language)"
            )
        return BadInput, "check the zone and the request" if api == "the TPU API" else "check the request"
    return OpsError, "see the message"


def _catalogue_fix(message: str) -> str:
    """The fix of the fault-catalogue family in an API error (e.g. a node that is gone under its queued
    resource: recreate it, not "check the zone"), or ""."""
    known = diagnose(CreateError(message)).top
    return known.fix if known else ""


def error_status(exc: BaseException) -> tuple[int | None, str]:
    """(HTTP status, the server's error message in full) of a Google client exception; (None, "") if none."""
    if isinstance(exc, core_exceptions.RetryError) and exc.cause is not None:
        exc = exc.cause
    if isinstance(exc, HttpError):
        return int(exc.status_code), str(exc.reason or "")
    if isinstance(exc, core_exceptions.GoogleAPICallError) and isinstance(exc.code, int):
        # REST errors from google-api-core read "GET http://...: <message>"; keep only the message.
        return exc.code, _REQUEST_PREFIX.sub("", str(exc.message or ""))
    return None, ""


def _permission_hint(what: str) -> str:
    """What a 403 on `what` needs, from the table of the bot's Google calls (ops/gcp/iam.py), e.g. "the bot's
    service account needs tpu.nodes.list (custom role tpuChatopsBot): run deploy/gcp-setup.sh"; "" when
    the table has no row for it."""
    calls = iam.permissions_for(what)
    if not calls:
        return ""
    where = {
        "bot-role": f"custom role {iam.BOT_ROLE_ID}",
        "secret-accessor": "roles/secretmanager.secretAccessor on the secret",
        "secret-version-adder": "roles/secretmanager.secretVersionAdder on the secret",
        "service-account-user": "roles/iam.serviceAccountUser on TPU_SERVICE_ACCOUNT",
        "not-granted": "not granted by the setup script",
    }
    needs = ", ".join(f"{call.permission} ({where[call.grant]})" for call in calls)
    return f"the bot's service account needs {needs}: run deploy/gcp-setup.sh (docs/deploy.md)"


def map_error(exc: BaseException, what: str, *, backend: str = "tpu", api: str = "the TPU API") -> OpsError:
    """Translate a Google client exception into an OpsError with a one-line message and a hint.

    Args:
        exc: what the library raised (HttpError, GoogleAPICallError, RetryError, requests/httplib2/socket
            errors, google-auth errors, ...).
        what: the API and call, e.g. "TPU API v2alpha1 queuedResources.list us-east5-a".
        backend: the `backend` of the returned error ("tpu", "quotas", "secrets", ...).
        api: how hints name the API ("the TPU API").

    Returns:
        NotFound (404), PermissionDenied (401/403, credential errors; a 403's hint names the permissions
        the call needs, from ops/gcp/iam.py), QuotaExceeded (429),
        BackendUnavailable (5xx, connection refused, DNS), BackendTimeout (timeouts, 504), BadInput (400),
        or a plain OpsError for anything else (409 included: `create_error` makes it AlreadyExists).
        Messages are one line of at most 300 characters.
    """
    if isinstance(exc, OpsError):
        return exc
    if isinstance(exc, core_exceptions.RetryError) and exc.cause is not None:
        exc = exc.cause
    status, detail = error_status(exc)
    if status is not None:
        cls, hint = _hint_for_status(status, api)
        message = f"{what}: HTTP {status} {_http_phrase(status)}" + (f": {detail}" if detail else "")
        if status == 404:  # a node gone under its queued resource is not a wrong zone
            hint = _catalogue_fix(message) or hint
        if status == 403:
            hint = _permission_hint(what) or hint
        return cls(one_line(message), hint, backend=backend)
    if isinstance(exc, requests.exceptions.Timeout | TimeoutError | core_exceptions.DeadlineExceeded):
        return BackendTimeout(one_line(f"{what}: no answer in time"), "retry in a minute", backend=backend)
    if isinstance(exc, auth_exceptions.RefreshError | auth_exceptions.DefaultCredentialsError):
        return PermissionDenied(
            one_line(f"{what}: credentials rejected: {exc}"),
            "refresh the bot's Google credentials",
            backend=backend,
        )
    if isinstance(
        exc,
        requests.exceptions.ConnectionError
        | ConnectionError
        | OSError
        | httplib2.HttpLib2Error
        | auth_exceptions.TransportError,
    ):
        return BackendUnavailable(
            one_line(f"{what}: cannot connect ({type(exc).__name__}: {exc})"),
            "check the network and the API endpoint, then retry",
            backend=backend,
        )
    return BackendUnavailable(
        one_line(f"{what}: unexpected {type(exc).__name__}: {exc}"),
        "retry; report it if it persists",
        backend=backend,
    )


# Longer than MAX_MESSAGE_CHARS: create and operation errors quote Google's text in full (the accelerator
# error alone is ~260 characters) because the capacity search and the user both need all of it.
MAX_CHANGE_MESSAGE_CHARS = 600


def _zone_error(message: str, reason: str, fix: str = "") -> UnsupportedInZone:
    """A refusal that is permanent for this zone, type and provisioning model; the hint is the catalogue
    family's fix when there is one."""
    return UnsupportedInZone(
        one_line(message, MAX_CHANGE_MESSAGE_CHARS),
        fix or f"{reason}: permanent for this zone, type and provisioning model; try another zone",
        backend="tpu",
    )


def create_error(exc: BaseException, what: str) -> OpsError:
    """Map a failed change (create, delete, reset, start, stop): like `map_error`, but typed and hinted by
    the fault catalogue (`ops.diagnosis.zonefit.classify`, then the family's fix), and Google's message kept
    in full
    (up to 600 characters).

    A refusal retrying cannot fix for this zone (the type, the provisioning model or the zone not offered, no
    quota at all: "Limit: 0") becomes UnsupportedInZone, whatever the HTTP status (a quota of 0 comes as
    429); HTTP 409 becomes AlreadyExists; a 429 keeps QuotaExceeded with its family's fix (quota in use: free
    or request some; a per-minute limit: send it again in a minute), and a 429 no family knows says so
    instead of "retry".
    """
    error = map_error(exc, what)
    status, detail = error_status(exc)
    if status is None:
        return error
    message = f"{what}: HTTP {status} {_http_phrase(status)}" + (f": {detail}" if detail else "")
    verdict = classify(f"HTTP {status}: {detail}")
    if verdict.remember:
        return _zone_error(message, verdict.reason, _catalogue_fix(message))
    line = one_line(message, MAX_CHANGE_MESSAGE_CHARS)
    if status == 409:
        return AlreadyExists(line, "pick another name, or delete the existing one first", backend="tpu")
    if status == 429:
        hint = _catalogue_fix(message) or (
            "a quota or a per-minute limit of the TPU API (HTTP 429) in words the bot does not know: read "
            "the message; the project's quotas are in the Cloud console (IAM & Admin > Quotas)"
        )
        return QuotaExceeded(line, hint, backend="tpu")
    return type(error)(line, error.hint, backend="tpu")


def operation_error(error: Mapping[str, Any], what: str) -> OpsError:
    """The typed error of a failed long-running operation (`Operation.error`, a google.rpc.Status).

    Args:
        error: the operation's `error` dict: {"code": 8, "message": "..."}.
        what: the operation, e.g. "TPU operation create projects/p/locations/z/queuedResources/q".

    Returns:
        UnsupportedInZone when the text says the zone does not offer the accelerator type, provisioning
        model or zone (e.g. code 3 "FLEX_START provisioning model is not supported ..."); for code 8
        (RESOURCE_EXHAUSTED) QuotaExceeded if the text names a quota, else CapacityUnavailable (stockout);
        else by code: 1 Cancelled, 3/9/11 BadInput, 4 BackendTimeout, 5 NotFound, 6 AlreadyExists, 7/16
        PermissionDenied, 2/10/13/14/15 BackendUnavailable, others OpsError. Codes: google.rpc.Code.
    """
    try:
        code = int(error.get("code", 2))
    except (TypeError, ValueError):
        code = 2
    text = str(error.get("message") or "")
    message = f"{what} failed: {RPC_CODES.get(code, f'code {code}')} (code {code})" + (
        f": {text}" if text else ""
    )
    verdict = classify(f"code {code}: {text}")
    if verdict.remember:
        return _zone_error(message, verdict.reason, _catalogue_fix(message))
    line = one_line(message, MAX_CHANGE_MESSAGE_CHARS)
    if code == 8:
        if verdict.reason == "quota exceeded":
            return QuotaExceeded(
                line,
                _catalogue_fix(message) or "TPU quota in use: free some, ask for more, or try another zone",
                backend="tpu",
            )
        return CapacityUnavailable(
            line, "no capacity now: try another zone, or wait and retry", backend="tpu"
        )
    by_code: dict[int, tuple[type[OpsError], str]] = {
        1: (Cancelled, "the operation was cancelled"),
        3: (BadInput, "check the request"),
        9: (BadInput, "the resource is not in a state that allows this"),
        11: (BadInput, "check the request"),
        4: (BackendTimeout, "the operation timed out: retry"),
        5: (NotFound, "check the name and the zone"),
        6: (AlreadyExists, "pick another name, or delete the existing one first"),
        7: (PermissionDenied, "check the bot's credentials and its TPU roles on the project"),
        16: (PermissionDenied, "check the bot's credentials"),
    }
    cls, hint = by_code.get(code, (BackendUnavailable, "the TPU API had trouble: retry in a minute"))
    if code not in by_code and code not in (2, 10, 13, 14, 15):
        cls, hint = OpsError, "see the message"
    return cls(line, hint, backend="tpu")
