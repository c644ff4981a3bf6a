"""Mask secrets in text before it reaches a model (log exemplars, thread history, tool results).

`redact(text)` replaces each secret with `[REDACTED:<kind>]`. Kinds, in the order they are applied:

    private_key           `"private_key": "..."` in service-account JSON, and PEM
                          `-----BEGIN ... PRIVATE KEY-----` blocks (up to the END line, or to the end of the
                          base64 run when truncated)
    url_password          the password of `scheme://user:password@host` (the user name is kept)
    bearer_token          `Authorization: Bearer <token>` (and any `Bearer <token>` of 8+ characters)
    slack_token           xoxb-, xoxp-, xoxa-, xoxr-, xoxs- and xapp- tokens
    slack_signing_secret  `SLACK_SIGNING_SECRET=...` / `signing_secret: ...` assignments (the secret itself is
                          32 opaque hex characters, so only the assignment can be recognised)
    hf_token              Hugging Face tokens `hf_` + 30 or more letters/digits
    google_api_key        `AIza` + 35 characters
    token / api_key / password / secret
                          generic assignments `NAME=value`, `NAME: value`, `"NAME": "value"` where NAME ends
                          with token, api_key (apikey, api-key), password (passwd, pwd) or secret

Ordinary text is left alone: commit hashes, model ids, IP addresses, timestamps, request ids, and words such
as `max_tokens=512` (NAME must END with one of the words above). Values already masked are not masked again.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["KINDS", "redact"]

KINDS = (
    "private_key",
    "url_password",
    "bearer_token",
    "slack_token",
    "slack_signing_secret",
    "hf_token",
    "google_api_key",
    "token",
    "api_key",
    "password",
    "secret",
)


def _mask(kind: str) -> str:
    return f"[REDACTED:{kind}]"


_NOT_MASKED = r"(?!\[REDACTED)"

_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    # Service-account JSON: the whole string value (it holds a PEM block with literal \n escapes).
    (
        re.compile(r'("private_key"\s*:\s*")(?:[^"\\]|\\.)*(")'),
        lambda m: f"{m.group(1)}{_mask('private_key')}{m.group(2)}",
    ),
    # PEM blocks, complete or cut off.
    (
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|(?:[A-Za-z0-9+/=\s]|\\n)*)",
            re.DOTALL,
        ),
        lambda m: _mask("private_key"),
    ),
    (
        re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)" + _NOT_MASKED + r"([^\s@/]+)(@)"),
        lambda m: f"{m.group(1)}{_mask('url_password')}{m.group(3)}",
    ),
    (
        re.compile(r"(?i)(\bbearer\s+)" + _NOT_MASKED + r"([A-Za-z0-9._~+/-]{8,}=*)"),
        lambda m: f"{m.group(1)}{_mask('bearer_token')}",
    ),
    (
        re.compile(r"\b(?:xox[abprs]-[A-Za-z0-9-]{8,}|xapp-\d-[A-Za-z0-9-]{8,})"),
        lambda m: _mask("slack_token"),
    ),
    (
        re.compile(
            r"(?i)\b((?:SLACK_)?SIGNING_SECRET[\"']?\s*[=:]\s*[\"']?)" + _NOT_MASKED + r"([^\s\"',;&]+)"
        ),
        lambda m: f"{m.group(1)}{_mask('slack_signing_secret')}",
    ),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), lambda m: _mask("hf_token")),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), lambda m: _mask("google_api_key")),
]

_GENERIC = re.compile(
    r"(?i)(?<![A-Za-z0-9])([A-Za-z0-9_.-]*?(token|api[_-]?key|apikey|password|passwd|pwd|secret))"
    r"([\"']?\s*[=:]\s*)([\"']?)" + _NOT_MASKED + r"([^\s\"'&,;]+)"
)


def _generic_kind(word: str) -> str:
    word = word.lower().replace("-", "_")
    if word.endswith("token"):
        return "token"
    if word.endswith(("api_key", "apikey")):
        return "api_key"
    if word.endswith(("password", "passwd", "pwd")):
        return "password"
    return "secret"


def _generic(match: re.Match[str]) -> str:
    name, _, sep, quote, _value = match.groups()
    return f"{name}{sep}{quote}{_mask(_generic_kind(match.group(2)))}"


def redact(text: str) -> str:
    """Mask secrets in `text` (see the module docstring for what is recognised).

    Args:
        text: any text: log lines, Slack messages, tool output.

    Returns:
        The text with each secret replaced by `[REDACTED:<kind>]`; unchanged when it holds none.
    """
    if not text:
        return text
    for pattern, replace in _RULES:
        text = pattern.sub(replace, text)
    return _GENERIC.sub(_generic, text)
