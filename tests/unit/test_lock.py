"""The lock files pin, with hashes, every package of the tree for Python 3.11-3.13, agree with the pins in
pyproject.toml, and keep the dev tools out of the production lock; `.ci/check-lock` (run by CI right after
`make install`) reports any difference between a virtualenv and the lock."""

from __future__ import annotations

import re
import runpy
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
ENTRY = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>\S+?)(?: ;(?P<marker>[^\\]+))? \\$")


def _entries(lock: str) -> dict[str, list[tuple[str, str]]]:
    """{canonical name: [(version, marker), ...]} with a check that each entry carries sha256 hashes."""
    lines = (ROOT / lock).read_text().splitlines()
    entries: dict[str, list[tuple[str, str]]] = {}
    for index, line in enumerate(lines):
        match = ENTRY.match(line)
        if match is None:
            continue
        assert lines[index + 1].strip().startswith("--hash=sha256:"), f"{lock}: {line} has no hash"
        name = canonicalize_name(match.group("name"))
        entries.setdefault(name, []).append((match.group("version"), (match.group("marker") or "").strip()))
    return entries


def _pins(group: str | None) -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] if group is None else project["optional-dependencies"][group]
    pins = {}
    for spec in specs:
        requirement = Requirement(spec)
        (pin,) = requirement.specifier
        assert pin.operator == "==", f"{spec} is not pinned"
        pins[canonicalize_name(requirement.name)] = pin.version
    return pins


def test_production_lock_pins_every_runtime_dependency_and_no_dev_tool() -> None:
    entries = _entries("requirements.lock")
    for name, version in _pins(None).items():
        assert [v for v, _ in entries[name]] == [version], name
    assert not set(_pins("dev")) & set(entries)


def test_dev_lock_pins_everything_pyproject_pins() -> None:
    entries = _entries("requirements-dev.lock")
    for name, version in {**_pins(None), **_pins("dev")}.items():
        assert [v for v, _ in entries[name]] == [version], name


def test_locks_resolve_for_every_supported_python() -> None:
    """A package locked at two versions is split by python_full_version markers, never left ambiguous."""
    for lock in ("requirements.lock", "requirements-dev.lock"):
        for name, versions in _entries(lock).items():
            if len(versions) > 1:
                assert all("python_full_version" in marker for _, marker in versions), (lock, name)


def test_check_lock_reports_missing_changed_and_extra_packages() -> None:
    check = runpy.run_path(str(ROOT / ".ci" / "check-lock"))
    pins = check["pinned"](
        "httpx==0.28.1 \\\n    --hash=sha256:aa\n"
        "numpy==2.4.6 ; python_full_version < '3.0' \\\n    --hash=sha256:bb\n"
        "idna==3.10 \\\n    --hash=sha256:cc\n"
    )
    assert pins == {"httpx": "0.28.1", "idna": "3.10"}
    tree = {"httpx": "0.28.0", "pip": "23.2.1", "tpu-chatops": "0.1.0", "requests": "2.0"}
    assert check["differences"](pins, tree) == [
        "httpx: locked 0.28.1, installed 0.28.0",
        "idna: locked 3.10, installed nothing",
        "requests 2.0: installed but not in the lock",
    ]
    assert check["differences"](pins, {**pins, "pip": "25.0"}) == []
