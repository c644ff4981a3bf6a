"""The fault catalogue's `wordings:` (ops/diagnosis/faults.yaml): upstream texts the code reads that are not
failure
families of their own (docker's root-cause words, a create error's status codes, a model server's
context-length refusal, sudo's password prompt), so that every failure wording lives in the catalogue file;
tests/unit/test_fault_wordings.py fails on one written in the code. Read one with `wording(name)`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ops.diagnosis.families import BUILTIN_PATH, named_entry
from ops.linear import LinearPattern, linear

__all__ = ["Wording", "load_wordings", "wording", "wordings"]


@dataclass(frozen=True)
class Wording:
    """Upstream text the code reads that is not a failure family of its own (docker's root-cause words, a
    create error's status code, a server's context-length refusal): kept in the catalogue's `wordings:`
    so that every failure wording lives in one file (a test fails on one written in the code).

    Attributes:
        name: stable id, e.g. "docker-root-cause".
        use: what reads it, for people.
        pattern: the wording's regexes as one RE2 alternation (case-insensitive when `ignore_case`).
        sources: where the wordings come from.
    """

    name: str
    use: str
    pattern: LinearPattern
    sources: tuple[str, ...] = ()


_WORDING_FIELDS = {"name", "use", "patterns", "ignore_case", "sources"}


def _wording(item: Any, where: str) -> Wording:
    name, where = named_entry(item, where, _WORDING_FIELDS, "docker-root-cause")
    if not isinstance(item.get("use"), str) or not item["use"].strip():
        raise ValueError(f"{where}: `use` is required text (what reads the wording)")
    raw = item.get("patterns")
    if not isinstance(raw, list) or not raw or not all(isinstance(p, str) and p for p in raw):
        raise ValueError(f"{where}: `patterns` must be a non-empty list of regexes")
    flags = "(?i)" if item.get("ignore_case") is True else ""
    try:
        pattern = linear(flags + "|".join(f"(?:{p})" for p in raw))
    except ValueError:
        raise ValueError(
            f"{where}: a pattern does not compile as RE2 (no look-around or back-references)"
        ) from None
    return Wording(
        name, " ".join(item["use"].split()), pattern, tuple(str(x) for x in item.get("sources") or ())
    )


def load_wordings(path: str | Path = BUILTIN_PATH) -> dict[str, Wording]:
    """The `wordings:` of a catalogue file (the built-in one: team files add families only).

    Returns:
        Wordings by name.

    Raises:
        ValueError: one line naming the file, the wording and what is wrong (see `Wording`); a name twice.
    """
    where = str(path)
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    raw = data.get("wordings") if isinstance(data, dict) else None
    if not isinstance(raw, list):
        raise ValueError(f"{where}: expected a `wordings:` list")
    out: dict[str, Wording] = {}
    for number, item in enumerate(raw, 1):
        found = _wording(item, f"{where}: wording {number}")
        if found.name in out:
            raise ValueError(f"{where}: wording {number}: the name {found.name} is used twice")
        out[found.name] = found
    return out


_lock = threading.Lock()
_wordings: dict[str, Wording] | None = None


def wordings() -> dict[str, Wording]:
    """The built-in catalogue's wordings by name (read once)."""
    global _wordings
    with _lock:
        if _wordings is None:
            _wordings = load_wordings()
        return _wordings


def wording(name: str) -> LinearPattern:
    """The regex of one wording of the built-in catalogue, e.g. `wording("docker-root-cause").search(line)`.

    Raises:
        KeyError: no wording has that name (a bug: the names are fixed in the code and the file).
    """
    return wordings()[name].pattern
