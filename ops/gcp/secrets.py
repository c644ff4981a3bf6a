"""Secrets (e.g. the Hugging Face token) in Secret Manager, through `secretmanager_v1` (REST transport).

Payloads are never logged and never appear in an error message or in a chained exception: errors are
re-raised `from None` with the payload text scrubbed from the server's message.
"""

from __future__ import annotations

from google.auth.credentials import Credentials
from google.cloud import secretmanager_v1

from ops.errors import BadInput, NotFound, OpsError
from ops.gcp import google
from ops.gcp.google import map_error
from ops.linear import linear

__all__ = ["SecretStore", "crc32c"]

_SECRET_ID = linear(r"^[A-Za-z0-9_-]{1,255}$")  # Secret Manager secret ids
_VERSION = linear(r"^(latest|[1-9]\d*)$")
_API = "the Secret Manager API"


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli, as `SecretPayload.dataCrc32c`) of `data`; crc32c(b"123456789") == 0xE3069283."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class SecretStore:
    """Add and read secret versions of one project.

    Args:
        project: project id, e.g. "demo-project".
        api_endpoint: base URL of the API, e.g. the simulator's "http://127.0.0.1:43121"; None for Google.
        credentials: google-auth credentials; None: see `ops.gcp.google`.
    """

    def __init__(
        self, project: str, *, api_endpoint: str | None = None, credentials: Credentials | None = None
    ) -> None:
        self.project = project
        self._client = google.secret_manager(api_endpoint, credentials)

    def close(self) -> None:
        """Close the client's HTTP session (a later call opens a new one)."""
        self._client.transport.close()

    def _error(self, exc: BaseException, what: str, secrets: tuple[str, ...] = ()) -> OpsError:
        error = map_error(exc, what, backend="secrets", api=_API)
        for secret in secrets:
            if secret:
                error.message = error.message.replace(secret, "<redacted>")
        error.args = (error.message,)
        return error

    @staticmethod
    def _check(secret_id: str) -> None:
        if not _SECRET_ID.match(secret_id or ""):
            raise BadInput(f"bad secret id {secret_id!r}", "use letters, digits, hyphens and underscores")

    def add_version(self, secret_id: str, payload: str) -> str:
        """Store `payload` as a new version (`secrets.addVersion`), creating the secret if it is missing
        (`secrets.create`, automatic replication).

        Args:
            secret_id: e.g. "hf-token".
            payload: the secret text (sent as UTF-8 with its CRC32C, `payload.dataCrc32c`).

        Returns:
            The version's name, e.g. "projects/demo-project/secrets/hf-token/versions/2".

        Raises:
            BadInput: malformed secret id or rejected request. PermissionDenied, QuotaExceeded,
            BackendUnavailable, BackendTimeout: see `ops.gcp.google.map_error` (backend "secrets").
        """
        self._check(secret_id)
        data = payload.encode()
        parent = f"projects/{self.project}/secrets/{secret_id}"
        request = {"parent": parent, "payload": {"data": data, "data_crc32c": crc32c(data)}}
        scrub = (payload,)
        try:
            version = self._client.add_secret_version(request=request)
        except Exception as exc:
            error = self._error(exc, f"Secret Manager secrets.addVersion {secret_id}", scrub)
            if not isinstance(error, NotFound):
                raise error from None
        else:
            return str(version.name)
        try:
            self._client.create_secret(
                request={
                    "parent": f"projects/{self.project}",
                    "secret_id": secret_id,
                    "secret": {"replication": {"automatic": {}}},
                }
            )
            version = self._client.add_secret_version(request=request)
        except Exception as exc:
            raise self._error(exc, f"Secret Manager secrets.create/addVersion {secret_id}", scrub) from None
        return str(version.name)

    def access(self, secret_id: str, version: str = "latest") -> str:
        """Read a version's payload (`versions.access`) and check its CRC32C when the API gives one.

        Args:
            secret_id: e.g. "hf-token".
            version: "latest" or a version number, e.g. "2".

        Returns:
            The payload as text (UTF-8).

        Raises:
            BadInput: malformed secret id or version. NotFound: no such secret or version.
            OpsError: the payload fails its checksum or is not UTF-8 (the payload is not shown).
            PermissionDenied, QuotaExceeded, BackendUnavailable, BackendTimeout: see
            `ops.gcp.google.map_error`.
        """
        self._check(secret_id)
        if not _VERSION.match(version or ""):
            raise BadInput(f"bad secret version {version!r}", "use latest or a version number")
        name = f"projects/{self.project}/secrets/{secret_id}/versions/{version}"
        what = f"Secret Manager versions.access {secret_id}/{version}"
        try:
            response = self._client.access_secret_version(
                request=secretmanager_v1.AccessSecretVersionRequest(name=name)
            )
        except Exception as exc:
            raise self._error(exc, what) from None
        data = bytes(response.payload.data)
        if "data_crc32c" in response.payload and response.payload.data_crc32c != crc32c(data):
            raise OpsError(
                f"{what}: payload checksum mismatch", "retry; the data was corrupted", backend="secrets"
            )
        try:
            return data.decode()
        except UnicodeDecodeError:
            raise OpsError(
                f"{what}: payload is not UTF-8 text", "store text secrets", backend="secrets"
            ) from None
