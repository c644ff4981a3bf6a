"""Mask secrets in text before it leaves the process: Slack messages and files, model prompts, audit rows,
logs.

`redact(text)` replaces each secret with `[REDACTED:<kind>]` and leaves everything else byte for byte as it
was. Two sources of rules, applied in this order:

1. Our own rules, for formats the library below lacks or gets too wide:

    private_key           `"private_key": "..."` in service-account JSON, and PEM `-----BEGIN ... PRIVATE
                          KEY-----` blocks (up to the END line, or to the end of the base64 run when cut off)
    url_password          the password of `scheme://user:password@host` and `scheme://:password@host`, up
                          to the last `@` before the host (a raw `@` in a password, as urlsplit reads it)
    bearer_token          `Authorization: Bearer <token>` (and any `Bearer <token>` of 8+ characters)
    basic_auth            `Authorization: Basic <base64>` (also `'Authorization': 'Basic ...'`, a dict repr)
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
                          `:` runs to the end of the line. Dict and JSON reprs as well (`'api_key': 'sk-...'`,
                          `"hf_token": "..."`), and a list value whole (`'api_key': ['sk-...']`, as vLLM
                          logs its `non-default args`).
    authorization         the value of an `Authorization` header or key (`'Authorization': 'sk-...'`), unless
                          it is a scheme and a token already masked (`Bearer [REDACTED:bearer_token]`).
    token                 prose such as "with token Zx81...", when the word has the entropy of a secret
                          (detect-secrets' Shannon entropy of at least 3.5 bits per character, letters of
                          both cases and digits).

What is never masked (the look-alikes): shell substitutions (`HF_TOKEN="$(gcloud secrets versions access
...)"`, `$HF_TOKEN`, `${TOKEN}`), names of secrets (`--secret=hf-token`, `HF_TOKEN_SECRET=hf-token`),
resource paths (`projects/p/secrets/hf-token/versions/3`), hashes, commit ids, model ids, request ids,
counters such as `max_tokens=512`, unset values (`'api_key': None`, `[]`). Values already masked are not
masked again.

Every rule runs in time linear in the text: the patterns are RE2 (`ops.linear`; detect-secrets' patterns
are compiled with RE2 after their look-arounds are replaced by a check of the neighbouring character), and
the value scans below visit each character a bounded number of times. So a hostile text (60,000 spaces after
`password: x`) costs what any text of its length costs.
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

from ops.linear import LinearMatch, LinearPattern, linear

__all__ = ["KINDS", "redact"]

_MASKED = "[REDACTED"


def _mask(kind: str) -> str:
    return f"[REDACTED:{kind}]"


_Replace = Callable[[LinearMatch], str]


def _unless_masked(group: int, replace: _Replace) -> _Replace:
    """`replace`, except where the value in `group` is a mask already (so redacting twice changes nothing)
    or a shell expansion (`$DB_PASSWORD`, `${PASS}`)."""

    def guarded(match: LinearMatch) -> str:
        value = match.group(group)
        return match.group(0) if value is not None and value.startswith((_MASKED, "$")) else replace(match)

    return guarded


def _hf_token(match: LinearMatch) -> str:
    # Mixed case or digits: `hf_` + a long lower-case identifier is a Python name, not a token.
    body = match.group(0)[3:]
    mixed = any(c.isupper() for c in body) and any(c.islower() for c in body)
    return _mask("hf_token") if mixed or any(c.isdigit() for c in body) else match.group(0)


_OWN_RULES: list[tuple[str, LinearPattern, _Replace]] = [
    # Service-account JSON: the whole string value (it holds a PEM block with literal \n escapes).
    (
        "private_key",
        linear(r'("private_key"\s*:\s*")(?:[^"\\]|\\.)*(")'),
        lambda m: f"{m.group(1)}{_mask('private_key')}{m.group(2)}",
    ),
    (
        "private_key",
        linear(
            r"(?s)-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?:[A-Za-z0-9+/=\s]|\\n)*)"
        ),
        lambda m: _mask("private_key"),
    ),
    (
        # The password runs to the last `@` before the host, as urlsplit reads `postgresql://u:p@ss@host/db`.
        "url_password",
        linear(r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,30}://[^\s:/@\"'<>]*:)([^\s/\"'<>]+)@"),
        _unless_masked(2, lambda m: f"{m.group(1)}{_mask('url_password')}@"),
    ),
    (
        "bearer_token",
        linear(r"(?i)(\bbearer\s+)([A-Za-z0-9._~+/-]{8,}=*)"),
        lambda m: f"{m.group(1)}{_mask('bearer_token')}",
    ),
    (
        "basic_auth",
        linear(r"(?i)(\bauthorization\\?[\"']?\s*[:=]\s*\\?[\"']?basic\s+)([A-Za-z0-9+/]{4,}=*)"),
        lambda m: f"{m.group(1)}{_mask('basic_auth')}",
    ),
    (
        "slack_token",
        linear(r"\b(?:xoxe\.)?(?:xox[abceprs]-[A-Za-z0-9-]{8,}|xapp-\d-[A-Za-z0-9-]{8,})"),
        lambda m: _mask("slack_token"),
    ),
    (
        "slack_signing_secret",
        linear(r"(?i)\b((?:SLACK_)?SIGNING_SECRET\\?[\"']?\s*[=:]\s*\\?[\"']?)([^\s\"'\\,;&]+)"),
        _unless_masked(2, lambda m: f"{m.group(1)}{_mask('slack_signing_secret')}"),
    ),
    (
        "google_access_token",
        linear(r"\b(?:ya29\.[A-Za-z0-9_.-]{20,}|1//0[A-Za-z0-9_-]{20,})"),
        lambda m: _mask("google_access_token"),
    ),
    (
        # Exactly 35 characters after AIza: the character after the key (group 2) is kept.
        "google_api_key",
        linear(r"\bAIza[0-9A-Za-z_-]{35}(\z|[^0-9A-Za-z_-])"),
        lambda m: _mask("google_api_key") + m.group(1),
    ),
    ("google_client_secret", linear(r"\bGOCSPX-[A-Za-z0-9_-]{20,}"), lambda m: _mask("google_client_secret")),
    ("hf_token", linear(r"\bhf_[A-Za-z0-9]{20,}\b"), _hf_token),
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

_LIBRARY_WORD_START = "(?:(?<=\\W)|(?<=^))"  # how some detect-secrets patterns begin
# Look-aheads some patterns end their token with; without them the match is extended over the whole token
# (`_TOKEN_CHARS` below), which masks the same secrets and a little more of a longer look-alike.
_LIBRARY_LOOKAHEADS = ("(?!\\w)", "(?![a-f0-9])")
_INLINE_FLAGS = ((re.IGNORECASE, "i"), (re.DOTALL, "s"), (re.MULTILINE, "m"))
# RE2 repeats at most 1000 times (`{50,1024}` is refused): such a bound becomes open, the token tail is
# taken whole anyway.
_LONG_REPEAT = linear(r"\{(\d+),\d{4,}\}")


def _library_pattern(pattern: re.Pattern[str]) -> LinearPattern:
    """A detect-secrets pattern in RE2, matching only where a word starts (a token never starts inside
    another word): the character before the token (or the start of the text) is matched, the token is
    group 1 and the detector's own groups follow.

    Raises:
        ValueError: the pattern uses what RE2 lacks (a new look-around in a new detect-secrets release).
    """
    source = pattern.pattern
    if source.startswith(_LIBRARY_WORD_START):
        before, source = r"(?:\A|[^A-Za-z0-9_])", source[len(_LIBRARY_WORD_START) :]
    elif source.startswith("\\/"):  # npm's `//registry/:_authToken=`, anywhere on a line
        before = ""
    else:
        before = r"(?:\A|[^A-Za-z0-9])"
    for lookahead in _LIBRARY_LOOKAHEADS:
        source = source.replace(lookahead, "")
    source = _LONG_REPEAT.sub(lambda m: "{" + m.group(1) + ",}", source)
    if pattern.flags & re.VERBOSE and any(c.isspace() or c == "#" for c in source):
        raise ValueError(f"a verbose pattern with spaces or comments: {source!r}")
    flags = "".join(letter for flag, letter in _INLINE_FLAGS if pattern.flags & flag)
    return linear((f"(?{flags})" if flags else "") + f"{before}({source})")


_LIBRARY_PATTERNS: list[tuple[LinearPattern, str, bool]] = [
    (_library_pattern(pattern), kind, group_is_secret)
    for detector, kind, group_is_secret in _LIBRARY
    # `denylist` is a class attribute of each detector (a property on the base class).
    for pattern in detector.denylist  # type: ignore[attr-defined]
]

_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_JWT_CHARS = _TOKEN_CHARS | frozenset(".+/=")

_NAME_WORDS = (
    r"token|api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key"
    r"|password|passwd|passphrase|pwd|secret|authorization"
)
# NAME=value, NAME: value, "NAME": "value", 'NAME': 'value', \"NAME\": \"value\" (JSON inside a JSON string),
# where NAME does not continue a word (the character before it, or the start, is matched too).
_GENERIC = linear(
    r"(?i)(?:\A|[^A-Za-z0-9_${])([A-Za-z0-9_.-]{0,64}?(" + _NAME_WORDS + r"))"
    r"(\\?[\"']?\s*[=:]\s*)(\\?[\"'`]?)"
)
# --password VALUE, --api-key VALUE (a flag and a separate word).
_FLAG = linear(r"(?i)(?:\A|[^A-Za-z0-9-])(--[a-z0-9-]*(?:token|api-key|apikey|password|passwd|secret))(\s+)")
# "with token Zx81...": a word after token/key/secret/password that looks random.
_PROSE = linear(r"(?i)\b(token|key|secret|password)(\s+(?:is\s+|of\s+)?)([A-Za-z0-9_+/=.-]{16,})")
_ENTROPY = Base64HighEntropyString()

# Names whose value names a secret (Secret Manager id, gcloud's --secret flag) instead of holding one.
_SECRET_NAME_NAMES = linear(r"(?i)^(?:--)?(?:[a-z0-9_-]*token[_-]secret|secret|secret[_-](?:name|id))$")
# Values that say a secret is not set.
_UNSET = frozenset({"none", "null", "nil", "true", "false", "[]", "{}"})
# How much of a value the look-alike checks read (a look-alike is recognised by how it starts).
_HEAD = 256

KINDS = tuple(
    dict.fromkeys(
        [kind for kind, _, _ in _OWN_RULES]
        + [kind for _, kind, _ in _LIBRARY]
        + ["token", "api_key", "password", "secret", "authorization"]
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
    if word.endswith("authorization"):
        return "authorization"
    return "secret"


def _is_look_alike(name: str, head: str) -> bool:
    """Whether an assigned value (`head`: how it starts, quote included) is not a secret: a shell expansion,
    a secret's name, a resource path, an unset value."""
    bare = head.strip("\"'`\\")
    return (
        not bare
        or bare.startswith(("$", _MASKED, "<", "%"))
        or bare.startswith("projects/")
        or "/secrets/" in bare
        or bare.lower() in _UNSET
        or bool(_SECRET_NAME_NAMES.match(name))
    )


def _quoted_end(text: str, start: int, quote: str) -> int:
    """Where a quoted value that starts at `start` ends: at its closing quote, else at the end of the line."""
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


def _assignment_at(text: str, i: int) -> bool:
    """Whether `name=` or `name:` starts at `i` (where a multi-word value ends early)."""
    n = len(text)
    if i >= n or not (text[i].isascii() and (text[i].isalpha() or text[i] == "_")):
        return False
    j = i + 1
    while j < n and (text[j].isalnum() or text[j] in "_.-"):
        j += 1
    return j < n and text[j] in "=:"


_WORD_STOPS = frozenset(" \t\n\r\"'&,;`\\")
_LINE_STOPS = frozenset("\n\r,;&`")


class _Values:
    """Where the unquoted values of one text end, each character visited a bounded number of times.

    A value ends at whitespace or a separator; a multi-word value (a password after `:`) at the end of its
    line, a separator or the next `name=` / `name:`; a list value (`['sk-...']`) at its `]`. A value that
    starts inside the last one of its shape (a look-alike, not masked, holding another `name=`) ends where
    that one ends, so it is not scanned again.
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._last: dict[str, tuple[int, int, int]] = {}  # shape -> (start, end scanned, end trimmed)

    def end(self, start: int, shape: str) -> int:
        """The end of the value at `start`; `shape` is "word", "line" or "list"."""
        last = self._last.get(shape)
        if last is None or not last[0] <= start <= last[1]:
            scanned = self._scan(start, shape)
            trimmed = scanned
            while shape == "line" and trimmed > start and self._text[trimmed - 1] in " \t":
                trimmed -= 1
            last = self._last[shape] = (start, scanned, trimmed)
        return max(start, last[2])

    def _scan(self, start: int, shape: str) -> int:
        text, n = self._text, len(self._text)
        i = start
        if shape == "list":
            while i < n and text[i] not in "]\n":
                i += 1
            return i + 1 if i < n and text[i] == "]" else i
        stops = _LINE_STOPS if shape == "line" else _WORD_STOPS
        while i < n and text[i] not in stops:
            if shape == "line" and text[i] in " \t":
                run_end = i + 1
                while run_end < n and text[run_end] in " \t":
                    run_end += 1
                if _assignment_at(text, run_end):
                    break
                i = run_end
                continue
            i += 1
        return i


def _scheme_and_mask(head: str) -> bool:
    """Whether an Authorization value is a scheme and a masked token (`Bearer [REDACTED:bearer_token]`)."""
    scheme, _, rest = head.partition(" ")
    return scheme.isalpha() and rest.lstrip().startswith(_MASKED)


def _mask_assignments(text: str) -> str:
    for pattern in (_GENERIC, _FLAG):
        values = _Values(text)
        out: list[str] = []
        pos = 0
        for match in pattern.finditer(text):
            if match.start(1) < pos:
                continue
            name = match.group(1)
            start = match.end()
            if pattern is _GENERIC:
                kind = _generic_kind(match.group(2))
                quote = match.group(4)
                if quote and start < len(text) and text[start].isspace():  # `password: " x"`: not quoted
                    quote, start = "", match.start(4)
                colon = ":" in match.group(3)
            else:
                kind = _generic_kind(name)
                quote = text[start] if start < len(text) and text[start] in "\"'" else ""
                start += len(quote)
                colon = False
            if quote:
                end = _quoted_end(text, start, quote)
            elif text.startswith("[", start) and not text.startswith(_MASKED, start):
                end = values.end(start, "list")
            elif colon and kind in ("password", "authorization"):
                end = values.end(start, "line")
            else:
                end = values.end(start, "word")
            head = text[start : min(end, start + _HEAD)]
            if (
                start == end
                or _is_look_alike(name, quote + head)
                or (pattern is _FLAG and head.startswith("-"))
                or (head.startswith("[") and _is_look_alike(name, head[1:].rstrip("]").strip(" ,")))
                or (kind == "authorization" and _scheme_and_mask(head))
            ):
                continue
            prose = not quote and colon and kind != "password"
            first_word = head.split(" ", 1)[0] if kind == "authorization" else head
            if prose and first_word.isascii() and first_word.isalpha() and first_word.islower():
                continue  # "token: check the secret", not a credential
            out.append(text[pos:start])
            out.append(_mask(kind))
            pos = end
        out.append(text[pos:])
        text = "".join(out)
    return text


def _mask_library(text: str) -> str:
    spans: list[tuple[int, int, str]] = []
    for pattern, kind, group_is_secret in _LIBRARY_PATTERNS:
        chars = _JWT_CHARS if kind == "jwt" else _TOKEN_CHARS
        tail_from, tail_to = -1, -1  # the last run of token characters scanned (matches come in order)
        for match in pattern.finditer(text):
            group = 2 if group_is_secret and pattern.groups >= 2 and match.start(2) >= 0 else 1
            end = match.end(group)
            # Some patterns end lazily (JWT) or at a fixed length: the token runs to the end of its run.
            if not tail_from <= end <= tail_to:
                tail_from = tail_to = end
                while tail_to < len(text) and text[tail_to] in chars:
                    tail_to += 1
            spans.append((match.start(group), tail_to, kind))
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end, kind in sorted(spans):
        if start < pos or text.startswith(_MASKED, start):
            continue
        out.append(text[pos:start])
        out.append(_mask(kind))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _mask_prose(match: LinearMatch) -> str:
    word = match.group(3)
    random_looking = (
        any(c.isupper() for c in word)
        and any(c.islower() for c in word)
        and any(c.isdigit() for c in word)
        and _ENTROPY.calculate_shannon_entropy(word) >= 3.5
        and "/" not in word.strip("/")
    )
    if not random_looking or word.startswith(_MASKED):
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{_mask('token')}"


def redact(text: str) -> str:
    """Mask secrets in `text` (see the module docstring for what is recognised and what is kept).

    Args:
        text: any text: log lines, Slack messages, tool output, prompts, files.

    Returns:
        The text with each secret replaced by `[REDACTED:<kind>]`; the very same string when it holds none.
        Time linear in the length of `text`.
    """
    if not text:
        return text
    for _, pattern, replace in _OWN_RULES:
        text = pattern.sub(replace, text)
    text = _mask_library(text)
    text = _mask_assignments(text)
    return _PROSE.sub(_mask_prose, text)
