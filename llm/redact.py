"""Mask secrets in text before it leaves the process: Slack messages and files, model prompts, audit rows,
logs.

`redact(text)` replaces each secret with `[REDACTED:<kind>]` and leaves everything else byte for byte as it
was. Two sources of rules, applied in this order:

1. Our own rules, for formats the library below lacks or gets too wide:

    private_key           `"private_key": "..."` in service-account JSON, and PEM `-----BEGIN ... PRIVATE
                          KEY-----` blocks (up to the END line, or to the end of the base64 run when cut off)
    url_password          the password of `scheme://user:password@host` and `scheme://:password@host`
    bearer_token          `Authorization: Bearer <token>` (and any `Bearer <token>` of 8+ characters)
    basic_auth            `Authorization: Basic <base64>`
    slack_token           xoxb-, xoxp-, xoxa-, xoxr-, xoxs-, xoxc-, xoxe- (refresh), `xoxe.xoxp-` (rotating)
                          and xapp- tokens
    slack_signing_secret  `SLACK_SIGNING_SECRET=...` / `signing_secret: ...` (the secret itself is 32
                          opaque hex characters, so only the assignment can be recognised)
    google_access_token   OAuth access tokens `ya29.` + 20 or more characters, and refresh tokens `1//0...`
    google_api_key        `AIza` + 35 characters
    google_client_secret  `GOCSPX-` + 20 or more characters
    hf_token              Hugging Face tokens `hf_` + 20 or more letters and digits, mixed case or with digits

2. The known token formats of detect-secrets (https://github.com/Yelp/detect-secrets, its `plugins/`):
   AWS access key ids and `aws..key = "40 chars"`, GitHub (`ghp_` ...), GitLab, JWT, OpenAI, Stripe,
   SendGrid, Twilio, npm, PyPI, Discord, Telegram, Mailchimp, Azure storage keys, Square, Cloudant,
   SoftLayer, IBM COS, Slack webhooks. Its keyword and entropy plugins are not used as they are (they mask
   hashes and secret *names*); its Shannon entropy decides the one prose rule below.

3. Assignments and flags, last:

    token / api_key / password / secret
                          `NAME=value`, `NAME: value`, `"NAME": "value"`, `\\"NAME\\": \\"value\\"` (JSON
                          inside a string), `--NAME value`, where NAME ends with token, api_key (apikey,
                          api-key),
                          access_key / secret_key / private_key, password (passwd, pwd, passphrase) or secret.
                          Quoted values are masked whole (multi-word passwords); an unquoted password after
                          `:` runs to the end of the line.
    token                 prose such as "with token Zx81...", when the word has the entropy of a secret
                          (detect-secrets' Shannon entropy of at least 3.5 bits per character, letters of
                          both cases and digits).

What is never masked (the look-alikes): shell substitutions (`HF_TOKEN="$(gcloud secrets versions access
...)"`, `$HF_TOKEN`, `${TOKEN}`), names of secrets (`--secret=hf-token`, `HF_TOKEN_SECRET=hf-token`),
resource paths (`projects/p/secrets/hf-token/versions/3`), hashes, commit ids, model ids, request ids,
counters such as `max_tokens=512`. Values already masked are not masked again.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.cloudant import CloudantDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.softlayer import SoftlayerDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

__all__ = ["KINDS", "redact"]


def _mask(kind: str) -> str:
    return f"[REDACTED:{kind}]"


_NOT_MASKED = r"(?!\[REDACTED)"

_Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]

_OWN_RULES: list[tuple[str, _Rule]] = [
    # Service-account JSON: the whole string value (it holds a PEM block with literal \n escapes).
    (
        "private_key",
        (
            re.compile(r'("private_key"\s*:\s*")(?:[^"\\]|\\.)*(")'),
            lambda m: f"{m.group(1)}{_mask('private_key')}{m.group(2)}",
        ),
    ),
    (
        "private_key",
        (
            re.compile(
                r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
                r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=\s]|\\n)*)",
                re.DOTALL,
            ),
            lambda m: _mask("private_key"),
        ),
    ),
    (
        "url_password",
        (
            re.compile(
                r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,30}://[^\s:/@]{0,256}:)" + _NOT_MASKED + r"([^\s@/]{1,256})(@)"
            ),
            lambda m: f"{m.group(1)}{_mask('url_password')}{m.group(3)}",
        ),
    ),
    (
        "bearer_token",
        (
            re.compile(r"(?i)(\bbearer\s+)" + _NOT_MASKED + r"([A-Za-z0-9._~+/-]{8,}=*)"),
            lambda m: f"{m.group(1)}{_mask('bearer_token')}",
        ),
    ),
    (
        "basic_auth",
        (
            re.compile(
                r"(?i)(\bauthorization\s*[:=]\s*[\"']?basic\s+)" + _NOT_MASKED + r"([A-Za-z0-9+/]{4,}=*)"
            ),
            lambda m: f"{m.group(1)}{_mask('basic_auth')}",
        ),
    ),
    (
        "slack_token",
        (
            re.compile(r"\b(?:xoxe\.)?(?:xox[abceprs]-[A-Za-z0-9-]{8,}|xapp-\d-[A-Za-z0-9-]{8,})"),
            lambda m: _mask("slack_token"),
        ),
    ),
    (
        "slack_signing_secret",
        (
            re.compile(
                r"(?i)\b((?:SLACK_)?SIGNING_SECRET\\?[\"']?\s*[=:]\s*\\?[\"']?)"
                + _NOT_MASKED
                + r"([^\s\"'\\,;&]+)"
            ),
            lambda m: f"{m.group(1)}{_mask('slack_signing_secret')}",
        ),
    ),
    (
        "google_access_token",
        (
            re.compile(r"\b(?:ya29\.[A-Za-z0-9_.-]{20,}|1//0[A-Za-z0-9_-]{20,})"),
            lambda m: _mask("google_access_token"),
        ),
    ),
    (
        "google_api_key",
        (re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), lambda m: _mask("google_api_key")),
    ),
    (
        "google_client_secret",
        (re.compile(r"\bGOCSPX-[A-Za-z0-9_-]{20,}"), lambda m: _mask("google_client_secret")),
    ),
    (
        "hf_token",
        (
            # Mixed case or digits: `hf_` + a long lower-case identifier is a Python name, not a token.
            re.compile(
                r"\bhf_(?=[A-Za-z0-9]*(?:[A-Z][A-Za-z0-9]*[a-z0-9]|[0-9]|[a-z][A-Za-z0-9]*[A-Z]))[A-Za-z0-9]{20,}\b"
            ),
            lambda m: _mask("hf_token"),
        ),
    ),
]

# detect-secrets detectors used for their known formats, with our kind name. A detector whose pattern
# captures the secret in group 1 (the rest is context) masks only that group.
_LIBRARY: list[tuple[type[RegexBasedDetector], str, bool]] = [
    (AWSKeyDetector, "aws_key", True),
    (AzureStorageKeyDetector, "azure_storage_key", False),
    (CloudantDetector, "cloudant_key", True),
    (DiscordBotTokenDetector, "discord_token", False),
    (GitHubTokenDetector, "github_token", False),
    (GitLabTokenDetector, "gitlab_token", False),
    (IbmCosHmacDetector, "ibm_cos_key", True),
    (JwtTokenDetector, "jwt", False),
    (MailchimpDetector, "mailchimp_key", False),
    (NpmDetector, "npm_token", True),
    (OpenAIDetector, "openai_key", False),
    (PypiTokenDetector, "pypi_token", False),
    (SendGridDetector, "sendgrid_key", False),
    (SlackDetector, "slack_token", False),
    (SoftlayerDetector, "softlayer_key", True),
    (SquareOAuthDetector, "square_secret", False),
    (StripeDetector, "stripe_key", False),
    (TelegramBotTokenDetector, "telegram_token", False),
    (TwilioKeyDetector, "twilio_key", False),
]


def _at_word_start(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """The pattern, matching only where a word starts: a token never starts inside another word, and a
    long run of look-alike characters (`eyJeyJ...`) is then scanned once instead of once per position."""
    if pattern.pattern.startswith(("(?:(?<=", "\\/", "(?:\\s")):
        return pattern
    return re.compile(r"(?<![A-Za-z0-9])(?:" + pattern.pattern + ")", pattern.flags)


_LIBRARY_PATTERNS: list[tuple[re.Pattern[str], str, bool]] = [
    (_at_word_start(pattern), kind, group_is_secret)
    for detector, kind, group_is_secret in _LIBRARY
    # `denylist` is a class attribute of each detector (a property on the base class).
    for pattern in detector.denylist  # type: ignore[attr-defined]
]

_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_-]*")
_JWT_TAIL = re.compile(r"[A-Za-z0-9_.+/=-]*")

_NAME_WORDS = (
    r"token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key"
    r"|password|passwd|passphrase|pwd|secret"
)
# NAME=value, NAME: value, "NAME": "value", \"NAME\": \"value\" (JSON inside a JSON string).
_GENERIC = re.compile(
    r"(?i)(?<![A-Za-z0-9_${])([A-Za-z0-9_.-]{0,64}?(" + _NAME_WORDS + r"))"
    r"(\\?[\"']?\s*[=:]\s*)(\\?[\"'`]?)(?!\s)" + _NOT_MASKED
)
# --password VALUE, --api-key VALUE (a flag and a separate word).
_FLAG = re.compile(
    r"(?i)(?<![A-Za-z0-9-])(--[a-z0-9-]*(?:token|api-key|apikey|password|passwd|secret))(\s+)" + _NOT_MASKED
)
# "with token Zx81...": a word after token/key/secret/password that looks random.
_PROSE = re.compile(r"(?i)\b(token|key|secret|password)(\s+(?:is\s+|of\s+)?)([A-Za-z0-9_+/=.-]{16,})")
_ENTROPY = Base64HighEntropyString()
# Where a multi-word value ends early: the next `name=` or `name:` on the same line.
_NEXT_ASSIGNMENT = re.compile(r"[ \t]+[A-Za-z_][\w.-]*[=:]")

# Names whose value names a secret (Secret Manager id, gcloud's --secret flag) instead of holding one.
_SECRET_NAME_NAMES = re.compile(r"(?i)^(?:--)?(?:[a-z0-9_-]*token[_-]secret|secret|secret[_-](?:name|id))$")

KINDS = tuple(
    dict.fromkeys(
        [kind for kind, _ in _OWN_RULES]
        + [kind for _, kind, _ in _LIBRARY]
        + ["token", "api_key", "password", "secret"]
    )
)


def _generic_kind(word: str) -> str:
    word = word.lower().replace("-", "_")
    if word.endswith("token"):
        return "token"
    if word.endswith(("key", "apikey")):
        return "api_key"
    if word.endswith(("password", "passwd", "pwd", "passphrase")):
        return "password"
    return "secret"


def _is_look_alike(name: str, value: str) -> bool:
    """Whether an assigned value is not a secret: a shell expansion, a secret's name, a resource path."""
    bare = value.strip("\"'`\\")
    return (
        not bare
        or bare.startswith(("$", "[REDACTED", "<", "%"))
        or bare.startswith("projects/")
        or "/secrets/" in bare
        or bool(_SECRET_NAME_NAMES.match(name))
    )


def _value_end(text: str, start: int, quote: str, multiword: bool) -> int:
    """Where the value that starts at `start` ends: at the closing quote when quoted, else at whitespace or
    a separator (at the end of the line for a multi-word password)."""
    if quote:
        closing = quote[-1]
        escaped = quote.startswith("\\")
        i = start
        while i < len(text):
            if escaped and text.startswith("\\" + closing, i):
                return i
            if not escaped and text[i] == "\\":
                i += 2
                continue
            if not escaped and text[i] == closing:
                return i
            if text[i] == "\n":
                return i
            i += 1
        return len(text)
    stops = "\n\r,;&`" if multiword else " \t\n\r\"'&,;`\\"
    i = start
    while i < len(text) and text[i] not in stops:
        if multiword and text[i] in " \t" and _NEXT_ASSIGNMENT.match(text, i):
            break
        i += 1
    if multiword:
        while i > start and text[i - 1] in " \t":
            i -= 1
    return i


def _mask_assignments(text: str) -> str:
    for pattern in (_GENERIC, _FLAG):
        out: list[str] = []
        pos = 0
        for match in pattern.finditer(text):
            if match.start() < pos:
                continue
            name = match.group(1)
            if pattern is _GENERIC:
                quote = match.group(4)
                multiword = bool(quote) or (
                    ":" in match.group(3) and _generic_kind(match.group(2)) == "password"
                )
            else:
                quote = text[match.end()] if match.end() < len(text) and text[match.end()] in "\"'" else ""
                multiword = bool(quote)
            start = match.end() + (len(quote) if pattern is _FLAG else 0)
            end = _value_end(text, start, quote, multiword and not quote)
            value = text[start:end]
            kind = _generic_kind(match.group(2) if pattern is _GENERIC else name)
            if (
                not value
                or _is_look_alike(name, quote + value)
                or (pattern is _FLAG and value.startswith("-"))
            ):
                continue
            prose = pattern is _GENERIC and not quote and ":" in match.group(3) and kind != "password"
            if prose and re.fullmatch(r"[a-z]+", value):  # "token: check the secret", not a credential
                continue
            out.append(text[pos:start])
            out.append(_mask(kind))
            pos = end
        out.append(text[pos:])
        text = "".join(out)
    return text


def _mask_library(text: str) -> str:
    spans: list[tuple[int, int, str]] = []
    for pattern, kind, group_is_secret in _LIBRARY_PATTERNS:
        if kind == "npm_token" and "_authToken" not in text:  # its `.+` is quadratic on long lines
            continue
        for match in pattern.finditer(text):
            group = 1 if group_is_secret and match.lastindex else 0
            end = match.end(group)
            if group == 0:  # some patterns end lazily (JWT): the token runs to the end of its characters
                tail = _JWT_TAIL if kind == "jwt" else _TOKEN_TAIL
                end = tail.match(text, end).end()  # type: ignore[union-attr]
            spans.append((match.start(group), end, kind))
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end, kind in sorted(spans):
        if start < pos or text.startswith("[REDACTED", start):
            continue
        out.append(text[pos:start])
        out.append(_mask(kind))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _mask_prose(match: re.Match[str]) -> str:
    word = match.group(3)
    random_looking = (
        any(c.isupper() for c in word)
        and any(c.islower() for c in word)
        and any(c.isdigit() for c in word)
        and _ENTROPY.calculate_shannon_entropy(word) >= 3.5
        and "/" not in word.strip("/")
    )
    if not random_looking or word.startswith("[REDACTED"):
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{_mask('token')}"


def redact(text: str) -> str:
    """Mask secrets in `text` (see the module docstring for what is recognised and what is kept).

    Args:
        text: any text: log lines, Slack messages, tool output, prompts, files.

    Returns:
        The text with each secret replaced by `[REDACTED:<kind>]`; the very same string when it holds none.
    """
    if not text:
        return text
    for _, (pattern, replace) in _OWN_RULES:
        text = pattern.sub(replace, text)
    text = _mask_library(text)
    text = _mask_assignments(text)
    return _PROSE.sub(_mask_prose, text)
