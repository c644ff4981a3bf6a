"""The one place Google API clients are built.

Everything else asks this module for a client (Cloud TPU v2alpha1 and v2, Cloud Quotas, Secret Manager,
Cloud Logging),
so pointing the whole bot at the local simulator (`sim.gcp.GcpSimulator`) only changes `api_endpoint`.
With an endpoint such as "http://127.0.0.1:43121" the clients use `AnonymousCredentials` (unless
credentials are given) and talk plain HTTP to it; with `api_endpoint=None` they use Application Default
Credentials and the real `https://*.googleapis.com/` endpoints.
"""

from __future__ import annotations

import functools
import json
import threading
import weakref
from typing import Any
from urllib.parse import urlsplit

import google.auth
import google_auth_httplib2
import httplib2
import requests
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials, Credentials
from google.auth.exceptions import DefaultCredentialsError
from google.cloud import cloudquotas_v1, secretmanager_v1
from google.cloud import logging as cloud_logging_lib
from google.cloud import tpu_v2 as gapic_tpu_v2
from googleapiclient import discovery, discovery_cache

from ops.errors import PermissionDenied

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
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
        https = [http for http, endpoint in _https.items() if endpoint == api_endpoint]
    for http in https:
        http.close()


def tpu_v2(api_endpoint: str | None, credentials: Credentials | None = None) -> gapic_tpu_v2.TpuClient:
    """A GAPIC `google.cloud.tpu_v2.TpuClient` using the REST transport.

    The client lacks the flex-start fields (provisioningModel, runDuration, terminationTimestamp): the
    v2 protos do not define them. Use `tpu_v2alpha1` to read those. The client is safe to share between
    threads; pass `timeout=` and `retry=` per call.

    Args:
        api_endpoint: base URL with scheme, e.g. "http://127.0.0.1:43121" (the simulator; a bare
            host:port would get https://); None for the real API.
        credentials: as for `tpu_v2alpha1`.

    Returns:
        `tpu_v2.TpuClient(transport="rest")`; its calls raise `google.api_core.exceptions.GoogleAPICallError`
        subclasses for HTTP errors and `requests` exceptions for connection failures and timeouts.

    Raises:
        PermissionDenied: no credentials given and no Application Default Credentials found.
    """
    creds = _credentials(api_endpoint, credentials)
    options = ClientOptions(api_endpoint=api_endpoint) if api_endpoint else None
    return gapic_tpu_v2.TpuClient(transport="rest", credentials=creds, client_options=options)


def cloud_quotas(
    api_endpoint: str | None, credentials: Credentials | None = None
) -> cloudquotas_v1.CloudQuotasClient:
    """A GAPIC `google.cloud.cloudquotas_v1.CloudQuotasClient` using the REST transport.

    Args:
        api_endpoint: base URL with scheme, e.g. "http://127.0.0.1:43121" (the simulator); None for the
            real API (https://cloudquotas.googleapis.com/).
        credentials: as for `tpu_v2alpha1`.

    Returns:
        `CloudQuotasClient(transport="rest")`, safe to share between threads; its calls raise
        `google.api_core.exceptions.GoogleAPICallError` subclasses for HTTP errors.

    Raises:
        PermissionDenied: no credentials given and no Application Default Credentials found.
    """
    creds = _credentials(api_endpoint, credentials)
    options = ClientOptions(api_endpoint=api_endpoint) if api_endpoint else None
    return cloudquotas_v1.CloudQuotasClient(transport="rest", credentials=creds, client_options=options)


def secret_manager(
    api_endpoint: str | None, credentials: Credentials | None = None
) -> secretmanager_v1.SecretManagerServiceClient:
    """A GAPIC `google.cloud.secretmanager_v1.SecretManagerServiceClient` using the REST transport.

    Args:
        api_endpoint: base URL with scheme, e.g. "http://127.0.0.1:43121" (the simulator); None for the
            real API (https://secretmanager.googleapis.com/).
        credentials: as for `tpu_v2alpha1`.

    Returns:
        `SecretManagerServiceClient(transport="rest")`, safe to share between threads.

    Raises:
        PermissionDenied: no credentials given and no Application Default Credentials found.
    """
    creds = _credentials(api_endpoint, credentials)
    options = ClientOptions(api_endpoint=api_endpoint) if api_endpoint else None
    return secretmanager_v1.SecretManagerServiceClient(
        transport="rest", credentials=creds, client_options=options
    )


def cloud_logging(
    project: str, api_endpoint: str | None, credentials: Credentials | None = None
) -> cloud_logging_lib.Client:
    """A hand-written `google.cloud.logging.Client` speaking REST/JSON (`_use_grpc=False`).

    Cloud Logging's GAPIC client is gRPC only (docs/google-apis.md §1 item 6); this REST client
    sends `POST /v2/entries:list`, which the simulator (`sim.gcp.GcpSimulator`) serves. Beware that its
    `list_entries` appends `AND timestamp>="<now - 24 h>"` to any filter without the word "timestamp"
    (§1 item 7 there): `ops.cloudlogs.build_filter` always writes its own bound.

    Args:
        project: the project id whose logs are read ("projects/<project>" is the default resource name).
        api_endpoint: base URL with scheme, e.g. "http://127.0.0.1:43121" (the simulator); None for the
            real API (https://logging.googleapis.com/).
        credentials: as for `tpu_v2alpha1`. With a loopback endpoint and no credentials the client uses a
            plain `requests.Session` that ignores HTTP(S)_PROXY from the environment.

    Returns:
        The client; close it with `client.close()` (closes its HTTP session). Its calls raise
        `google.api_core.exceptions.GoogleAPICallError` subclasses for HTTP errors and `requests`
        exceptions for connection failures and timeouts.

    Raises:
        PermissionDenied: no credentials given and no Application Default Credentials found.
    """
    creds = _credentials(api_endpoint, credentials)
    http: requests.Session | None = None
    if credentials is None and _is_loopback(api_endpoint):
        http = requests.Session()
        http.trust_env = False  # never send simulator traffic through a proxy
    return cloud_logging_lib.Client(
        project=project,
        credentials=creds,
        _http=http,
        _use_grpc=False,
        client_options={"api_endpoint": api_endpoint} if api_endpoint else None,
    )
