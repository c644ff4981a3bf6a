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

from ops.datafile import DataFileError, line_of, load
from ops.diagnosis.families import BUILTIN_PATH
from ops.diagnosis.schema import CatalogueFile, WordingEntry
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


def _wording(entry: WordingEntry) -> Wording:
    flags = "(?i)" if entry.ignore_case else ""
    pattern = linear(flags + "|".join(f"(?:{p})" for p in entry.patterns))
    return Wording(entry.name, " ".join(entry.use.split()), pattern, tuple(entry.sources))


def load_wordings(path: str | Path = BUILTIN_PATH) -> dict[str, Wording]:
    """The `wordings:` of a catalogue file (the built-in one: team files add families only), checked
    against its schema (`ops.diagnosis.schema.CatalogueFile`).

    Returns:
        Wordings by name.

    Raises:
        ops.datafile.DataFileError (a ValueError): every problem as "FILE:LINE: where: what" (see
            `WordingEntry`); no `wordings:` list; a name used twice.
    """
    data, root = load(path, CatalogueFile)
    if data.wordings is None:
        raise DataFileError(f"{path}:{line_of(root, ())}: expected a `wordings:` list")
    out: dict[str, Wording] = {}
    for number, entry in enumerate(data.wordings):
        if entry.name in out:
            line = line_of(root, ("wordings", number))
            raise DataFileError(f"{path}:{line}: wordings[{number}]: the name {entry.name} is used twice")
        out[entry.name] = _wording(entry)
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
