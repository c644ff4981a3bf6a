"""The Cloud Logging query language as the Google simulator understands it (SIMULATED; the language is
documented at https://cloud.google.com/logging/docs/view/logging-query-language).

`parse_log_filter` handles restrictions `field OP value` with OP in = != < <= > >= : =~ !~ (RE2 syntax) on
resource.type, resource.labels.X, severity (by rank), timestamp (RFC 3339), logName, textPayload,
jsonPayload.X, protoPayload.X, labels.X, insertId; AND, OR, NOT, "-", parentheses, implicit AND, and
free-text terms (case-insensitive, anywhere in the entry). An unparseable filter raises FilterError (the
API's 400 "Unparseable filter: ...", simulator text).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import re2

from sim.gcp.logentry import LOG_RANK, LOG_SEVERITIES, SimLogEntry, insert_id_of, strings_of

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the caller's 400, not a line on stderr


class FilterError(ValueError):
    """A Logging query the simulator cannot parse."""


_OPERATORS = (">=", "<=", "!=", "=~", "!~", "=", "<", ">", ":")
_WORD_END = set(' \t\r\n()"') | set("=!<>:~")
Predicate = Callable[[SimLogEntry], bool]


def _get_path(body: dict[str, Any], path: str) -> Any:
    value: Any = body
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return value


def _rank_of(value: str) -> int | None:
    name = value.upper()
    if name in LOG_RANK:
        return LOG_RANK[name]
    if value.isdigit():
        return min(int(value) // 100, len(LOG_SEVERITIES) - 1)
    return None


def _filter_time(value: str) -> datetime:
    text = value.strip()
    try:
        if re.match(r"^\d{4}-\d\d-\d\d$", text):
            return datetime.fromisoformat(text).replace(tzinfo=UTC)
        match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$", text)
        if not match:
            raise ValueError(text)
        fraction = (match.group(2) or "0")[:6].ljust(6, "0")
        zone = "+00:00" if match.group(3) in (None, "Z") else match.group(3)
        return datetime.fromisoformat(f"{match.group(1)}.{fraction}{zone}").astimezone(UTC)
    except ValueError:
        raise FilterError(f"invalid timestamp {value!r}") from None


def _compare(op: str, left: Any, right: Any) -> bool:
    if op in ("=", ":"):
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if op == ">=":
        return bool(left >= right)
    if op == "<=":
        return bool(left <= right)
    if op == ">":
        return bool(left > right)
    return bool(left < right)


def _comparison(field_path: str, op: str, value: str) -> Predicate:
    """The predicate of one `field OP value` restriction."""
    if field_path == "timestamp":
        if op in ("=~", "!~", ":"):
            raise FilterError("timestamp supports =, !=, <, <=, >, >=")
        moment = _filter_time(value)
        return lambda e: _compare(op, e.timestamp, moment)
    if field_path == "severity":
        rank = _rank_of(value)
        if rank is None:
            raise FilterError(f"invalid severity {value!r}")
        if op in ("=~", "!~"):
            raise FilterError("severity supports =, !=, <, <=, >, >=, :")
        return lambda e: _compare(op, LOG_RANK.get(str(e.body.get("severity", "DEFAULT")), 0), rank)
    if op in ("=~", "!~"):
        # The Logging query language's regular expressions are RE2 (cloud.google.com/logging/docs/view/
        # logging-query-language#regular-expressions): no lookaround, no backreferences.
        try:
            pattern = re2.compile(value, options=_RE2_OPTIONS)
        except re2.error as exc:
            raise FilterError(f"invalid regular expression {value!r}: {exc}") from None
        wanted = op == "=~"

        def regex(e: SimLogEntry) -> bool:
            got = _get_path(e.body, field_path)
            if got is None:
                return not wanted
            return (pattern.search(str(got)) is not None) == wanted

        return regex
    if op == ":":
        needle = value.lower()

        def has(e: SimLogEntry) -> bool:
            got = _get_path(e.body, field_path)
            if got is None:
                return False
            if value == "*":
                return True
            return (
                needle in " ".join(strings_of(got)).lower()
                if not isinstance(got, str)
                else needle in got.lower()
            )

        return has

    def cmp(e: SimLogEntry) -> bool:
        got = _get_path(e.body, field_path)
        if got is None:
            return op == "!="
        if isinstance(got, bool | int | float):
            try:
                return _compare(op, float(got), float(value))
            except ValueError:
                return op == "!="
        return _compare(op, str(got), value)

    return cmp


class _FilterParser:
    """Recursive-descent parser of the Logging query language subset the simulator serves.

    Precedence as documented for Cloud Logging: NOT (or a leading "-") binds tightest, then OR, then AND;
    juxtaposed restrictions are ANDed. Restrictions: `field OP value` with OP in = != < <= > >= : =~ !~
    (values quoted or bare), and free-text terms ("quoted" or bare words), matched case-insensitively
    anywhere in the entry.
    """

    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0

    def parse(self) -> Predicate:
        self._ws()
        if self.i >= len(self.s):
            return lambda e: True
        node = self._and()
        self._ws()
        if self.i < len(self.s):
            raise FilterError(f"unexpected {self.s[self.i : self.i + 20]!r} at column {self.i + 1}")
        return node

    def _ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def _keyword(self, word: str) -> bool:
        self._ws()
        end = self.i + len(word)
        if self.s.startswith(word, self.i) and (end >= len(self.s) or self.s[end] in ' \t\r\n()"'):
            self.i = end
            return True
        return False

    def _and(self) -> Predicate:
        parts = [self._or()]
        while True:
            self._ws()
            if self.i >= len(self.s) or self.s[self.i] == ")":
                break
            self._keyword("AND")
            parts.append(self._or())
        return parts[0] if len(parts) == 1 else (lambda e: all(p(e) for p in parts))

    def _or(self) -> Predicate:
        parts = [self._unary()]
        while self._keyword("OR"):
            parts.append(self._unary())
        return parts[0] if len(parts) == 1 else (lambda e: any(p(e) for p in parts))

    def _unary(self) -> Predicate:
        if self._keyword("NOT"):
            inner = self._unary()
            return lambda e: not inner(e)
        self._ws()
        if self.s.startswith("-", self.i) and self.i + 1 < len(self.s) and not self.s[self.i + 1].isspace():
            self.i += 1
            inner = self._unary()
            return lambda e: not inner(e)
        return self._primary()

    def _string(self) -> str:
        assert self.s[self.i] == '"'
        self.i += 1
        out = []
        while self.i < len(self.s):
            char = self.s[self.i]
            if char == "\\" and self.i + 1 < len(self.s):
                following = self.s[self.i + 1]  # \" and \\ unescape; other escapes (\d in a regex) stay
                out.append(following if following in '"\\' else char + following)
                self.i += 2
                continue
            if char == '"':
                self.i += 1
                return "".join(out)
            out.append(char)
            self.i += 1
        raise FilterError("unterminated string")

    def _primary(self) -> Predicate:
        self._ws()
        if self.i >= len(self.s):
            raise FilterError("unexpected end of filter")
        char = self.s[self.i]
        if char == "(":
            self.i += 1
            inner = self._and()
            self._ws()
            if not self.s.startswith(")", self.i):
                raise FilterError("missing )")
            self.i += 1
            return inner
        if char == ")":
            raise FilterError(f"unexpected ) at column {self.i + 1}")
        if char == '"':
            term = self._string().lower()
            return lambda e: term in e.blob
        start = self.i
        while self.i < len(self.s) and self.s[self.i] not in _WORD_END:
            self.i += 1
        word = self.s[start : self.i]
        if word == "sample" and self.s.startswith("(", self.i):
            return self._sample()
        self._ws()
        op = next((o for o in _OPERATORS if self.s.startswith(o, self.i)), None)
        if op is None:
            if not word or word in ("AND", "OR"):
                raise FilterError(f"unexpected {self.s[start : start + 20]!r} at column {start + 1}")
            term = word.lower()
            return lambda e: term in e.blob
        if not word:
            raise FilterError(f"operator {op} without a field at column {self.i + 1}")
        self.i += len(op)
        self._ws()
        if self.s.startswith('"', self.i):
            value = self._string()
        else:
            begin = self.i
            while self.i < len(self.s) and not self.s[self.i].isspace() and self.s[self.i] != ")":
                self.i += 1
            value = self.s[begin : self.i]
            if not value:
                raise FilterError(f"missing value after {word}{op}")
        return _comparison(word, op, value)

    def _sample(self) -> Predicate:
        """`sample(insertId, FRACTION)`: a deterministic FRACTION of the entries, chosen by a hash of the
        insertId (https://cloud.google.com/logging/docs/view/logging-query-language#sample). The hash
        (CRC-32) is the simulator's; a smaller fraction selects a subset of a larger one."""
        end = self.s.find(")", self.i)
        if end < 0:
            raise FilterError("missing ) after sample(")
        args = [a.strip() for a in self.s[self.i + 1 : end].split(",")]
        self.i = end + 1
        if len(args) != 2 or args[0] != "insertId":
            raise FilterError("sample() takes (insertId, FRACTION)")
        try:
            fraction = float(args[1])
        except ValueError:
            raise FilterError(f"invalid sample fraction {args[1]!r}") from None
        if not 0 <= fraction <= 1:
            raise FilterError("the sample fraction must be between 0 and 1")
        limit = fraction * 2**32
        return lambda e: zlib.crc32(insert_id_of(e).encode()) < limit


def parse_log_filter(text: str) -> Callable[[SimLogEntry], bool]:
    """Compile a Logging query into a predicate on stored entries.

    Raises:
        FilterError: the text does not parse (the API answers 400 INVALID_ARGUMENT).
    """
    return _FilterParser(text).parse()


def stored_log_entry(body: dict[str, Any], seq: int) -> SimLogEntry:
    """Index one LogEntry JSON body for filtering."""
    return SimLogEntry(_filter_time(body["timestamp"]), seq, body, " ".join(strings_of(body)).lower())
