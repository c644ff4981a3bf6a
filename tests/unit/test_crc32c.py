"""CRC32C as Secret Manager's `dataCrc32c` uses it (Castagnoli polynomial)."""

from ops.gcp.secrets import crc32c


def test_known_vectors() -> None:
    # The standard check value of CRC-32C (RFC 3720, appendix B.4).
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
