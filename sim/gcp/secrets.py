"""The Secret Manager API (secretmanager.googleapis.com v1) of the Google simulator, SIMULATED.

Served in the shapes of the `secretmanager.v1.json` discovery document, so the real client works against
it (`ops.gcp.google.secret_manager(url)`):

    POST /v1/projects/{p}/secrets?secretId={s}                     secrets.create
    GET /v1/projects/{p}/secrets/{s}                               secrets.get
    POST /v1/projects/{p}/secrets/{s}:addVersion                   secrets.addVersion
    GET /v1/projects/{p}/secrets/{s}/versions/{v}[:access]         versions.get / versions.access

Secret payloads never appear in an error message and their request bodies are never recorded.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from typing import Any

from ops.gcp.secrets import crc32c
from sim.gcp.api import ApiError, json_body, rfc3339
from sim.gcp.world import Route, SimSecret, World

_SECRET_ID = re.compile(r"^[A-Za-z0-9_-]{1,255}$")


def secret_json(world: World, secret: SimSecret) -> dict[str, Any]:
    """A Secret Manager `Secret` (secretmanager.v1 discovery shape)."""
    body: dict[str, Any] = {
        "name": f"projects/{world.project}/secrets/{secret.secret_id}",
        "replication": {"automatic": {}},
        "createTime": rfc3339(secret.create_time),
        "etag": f'"{zlib.crc32(secret.secret_id.encode()):x}{len(secret.versions):x}"',
    }
    if secret.labels:
        body["labels"] = dict(secret.labels)
    return body


def secret_version_json(world: World, secret: SimSecret, number: int) -> dict[str, Any]:
    """A `SecretVersion` (versions are 1-based and always ENABLED here)."""
    _, created, checksum = secret.versions[number - 1]
    return {
        "name": f"projects/{world.project}/secrets/{secret.secret_id}/versions/{number}",
        "createTime": rfc3339(created),
        "state": "ENABLED",
        "etag": f'"{number:x}"',
        "clientSpecifiedPayloadChecksum": checksum,
    }


# ---- handlers (called with world.lock held; payloads never appear in a message)
def _secret(w: World, m: re.Match[str]) -> SimSecret:
    w.check(m["project"])
    secret = w.secrets.get(m["secret"])
    if secret is None:
        raise ApiError(
            404, f"Secret [projects/{w.project}/secrets/{m['secret']}] not found or has no versions."
        )
    return secret


def _create_secret(w: World, m: re.Match[str], query: dict[str, str], raw: bytes) -> dict[str, Any]:
    w.check(m["project"])
    secret_id = query.get("secretId", "")
    if not _SECRET_ID.match(secret_id):
        raise ApiError(400, "Invalid secret id: use 1-255 letters, digits, hyphens and underscores.")
    if secret_id in w.secrets:
        raise ApiError(409, f"Secret [projects/{w.project}/secrets/{secret_id}] already exists.")
    body = json_body(raw)
    if not isinstance(body.get("replication"), dict) or not body["replication"]:
        raise ApiError(400, "Secret.replication is required.")
    labels = body.get("labels") or {}
    w.secrets[secret_id] = SimSecret(secret_id, w.now, labels={str(k): str(v) for k, v in labels.items()})
    return secret_json(w, w.secrets[secret_id])


def _get_secret(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    return secret_json(w, _secret(w, m))


def _add_secret_version(w: World, m: re.Match[str], query: dict[str, str], raw: bytes) -> dict[str, Any]:
    secret = _secret(w, m)
    payload = json_body(raw).get("payload") or {}
    try:
        data = base64.b64decode(str(payload.get("data", "")), validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, "Invalid value at 'payload.data': not valid base64.") from None
    checksum = payload.get("dataCrc32c")
    if checksum is not None and str(checksum) != str(crc32c(data)):
        raise ApiError(400, "The checksum in field payload.data_crc32c is incorrect.")
    secret.versions.append((data, w.now, checksum is not None))
    return secret_version_json(w, secret, len(secret.versions))


def _version_number(w: World, secret: SimSecret, version: str) -> int:
    number = len(secret.versions) if version == "latest" else int(version) if version.isdigit() else 0
    if not 1 <= number <= len(secret.versions):
        raise ApiError(
            404,
            f"Secret Version [projects/{w.project}/secrets/{secret.secret_id}/versions/{version}] not found.",
        )
    return number


def _get_secret_version(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    secret = _secret(w, m)
    return secret_version_json(w, secret, _version_number(w, secret, m["version"]))


def _access_secret(w: World, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
    secret = _secret(w, m)
    number = _version_number(w, secret, m["version"])
    data = secret.versions[number - 1][0]
    return {
        "name": f"projects/{w.project}/secrets/{secret.secret_id}/versions/{number}",
        "payload": {"data": base64.b64encode(data).decode(), "dataCrc32c": str(crc32c(data))},
    }


_SECRET = r"/v1/projects/(?P<project>[^/]+)/secrets/(?P<secret>[^/:]+)"
ROUTES: list[Route] = [
    ("POST", r"/v1/projects/(?P<project>[^/]+)/secrets$", _create_secret),
    ("GET", _SECRET + "$", _get_secret),
    ("POST", _SECRET + ":addVersion$", _add_secret_version),
    ("GET", _SECRET + r"/versions/(?P<version>[^/:]+)$", _get_secret_version),
    ("GET", _SECRET + r"/versions/(?P<version>[^/:]+):access$", _access_secret),
]
