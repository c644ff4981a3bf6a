"""docs/architecture.md names the files each traced command really passes through (`sim.paths`)."""

from __future__ import annotations

import re

import sim.paths


def _documented(section: str) -> dict[str, set[str]]:
    documented: dict[str, set[str]] = {}
    current: set[str] = set()
    for line in section.splitlines():
        heading = re.match(r"^`(.+)` passes through \d+ project files", line)
        if heading:
            current = documented.setdefault(heading.group(1), set())
        item = re.match(r"^\d+\. `(.+)`$", line)
        if item:
            current.add(item.group(1))
    return documented


def test_the_map_names_the_files_a_trace_finds() -> None:
    section = sim.paths.written(sim.paths.ARCHITECTURE.read_text())
    assert section is not None, (
        "docs/architecture.md has no generated paths section: python -m sim paths --write"
    )
    traced = {line: set(files) for line, files in sim.paths.trace().items()}
    documented = _documented(section)
    for line in sim.paths.TRACED_LINES:
        assert traced[line] == documented.get(line), (
            f"{line}: not in the map {sorted(traced[line] - documented.get(line, set()))}, "
            f"no longer passed through {sorted(documented.get(line, set()) - traced[line])}; "
            "run `python -m sim paths --write`"
        )
