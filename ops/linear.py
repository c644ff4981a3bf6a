"""Regular expressions that run in time linear in their input: RE2 (google-re2), for every rule applied to
text the bot does not control (request bodies, Slack text, log lines, model answers, error messages).

Python's `re` backtracks: a rule such as `[ \\t]+x`, tried at every position of a run of 60,000 spaces, costs
60,000 squared steps. RE2 never backtracks (https://github.com/google/re2/wiki/WhyRE2), at the price of
look-around assertions and back-references, which the callers replace with a check of the neighbouring
character in code. Syntax differences that matter here (https://github.com/google/re2/wiki/Syntax):
`\\d`, `\\w`, `\\s` and `\\b` are ASCII; `$` matches only at the very end (Python's also before a final
newline); `\\z` is the end of text (Python's `\\Z`); flags are written inline (`(?i)`, `(?s)`, `(?m)`).

Cost: `finditer`, `sub`, `split`, `findall` and one `search`/`match` each encode the text to UTF-8 once,
so they are linear; a loop calling `search(text, pos)` over one long text re-encodes it every time, so the
callers scan with `finditer` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, cast

import re2

__all__ = ["LinearMatch", "LinearPattern", "PatternSet", "is_linear", "linear"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a pattern RE2 refuses raises re2.error; no line on stderr


class LinearMatch(Protocol):
    """The match object of a `LinearPattern` (the subset of `re.Match` that RE2's matches offer)."""

    lastindex: int | None

    def group(self, index: int | str = 0, /) -> Any: ...
    def groupdict(self, default: Any = None) -> dict[str, Any]: ...
    def __getitem__(self, index: int | str, /) -> Any: ...
    def groups(self, default: Any = None) -> tuple[Any, ...]: ...
    def start(self, index: int = 0, /) -> int: ...
    def end(self, index: int = 0, /) -> int: ...
    def span(self, index: int = 0, /) -> tuple[int, int]: ...


class LinearPattern(Protocol):
    """A compiled RE2 pattern (the subset of `re.Pattern` that google-re2 offers)."""

    @property
    def pattern(self) -> str: ...
    @property
    def groups(self) -> int: ...

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> LinearMatch | None: ...
    def match(self, text: str, pos: int = 0, endpos: int | None = None) -> LinearMatch | None: ...
    def fullmatch(self, text: str, pos: int = 0, endpos: int | None = None) -> LinearMatch | None: ...
    def finditer(self, text: str, pos: int = 0, endpos: int | None = None) -> Iterator[LinearMatch]: ...
    def findall(self, text: str, pos: int = 0, endpos: int | None = None) -> list[Any]: ...
    def split(self, text: str, maxsplit: int = 0) -> list[str]: ...
    def sub(self, repl: str | Callable[[LinearMatch], str], text: str, count: int = 0) -> str: ...


def linear(pattern: str) -> LinearPattern:
    """Compile `pattern` with RE2.

    Args:
        pattern: RE2 syntax (no look-around, no back-references; flags inline, e.g. "(?i)").

    Returns:
        The compiled pattern; matching it costs time linear in the length of the text.

    Raises:
        ValueError: RE2 refuses the pattern (the message names it).
    """
    try:
        return cast(LinearPattern, re2.compile(pattern, options=_OPTIONS))
    except re2.error:
        raise ValueError(f"not an RE2 pattern (no look-around or back-references): {pattern!r}") from None


_COMPILED_TYPE = type(re2.compile("a", options=_OPTIONS))


def is_linear(pattern: object) -> bool:
    """Whether `pattern` was compiled by RE2 (what the tests check of every rule on untrusted text)."""
    return isinstance(pattern, _COMPILED_TYPE)


# A set of many patterns gets more memory than one pattern's default 8 MiB, so its DFA does not give up on a
# long text (RE2::Set has no slower fallback: it would report no match).
_SET_OPTIONS = re2.Options()
_SET_OPTIONS.log_errors = False
_SET_OPTIONS.max_mem = 64 << 20


class PatternSet:
    """Which of many RE2 patterns occur in a text, found in one pass over it (RE2::Set), whatever their
    number; the caller then runs only those for their spans and groups.

    Args:
        patterns: RE2 patterns (the `pattern` of `linear` results).

    Raises:
        ValueError: a pattern RE2 refuses.
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self._set = re2.Set.SearchSet(_SET_OPTIONS)
        for pattern in patterns:
            try:
                self._set.Add(pattern)
            except re2.error:
                raise ValueError(f"not an RE2 pattern: {pattern!r}") from None
        self._set.Compile()

    def matching(self, text: str) -> list[int]:
        """The indices (in the order given) of the patterns found anywhere in `text`, ascending."""
        return sorted(self._set.Match(text) or ())
