"""The production image: built from the lock with hashes, holding the product only. No Docker daemon is
needed: the build context is worked out from .dockerignore (an allowlist) and the Dockerfile's COPY lines."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _allowlist() -> set[str]:
    rules = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    rules = [rule for rule in rules if rule and not rule.startswith("#")]
    assert rules[0] == "*", "the .dockerignore starts by excluding everything"
    return {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}


def test_build_context_is_the_product_only() -> None:
    allowed = _allowlist()
    assert allowed == {"pyproject.toml", "README.md", "requirements.lock", "bot", "ops", "llm"}
    for kept_out in (".venv", ".git", ".env", "sim", "tests", "bench", "requirements-dev.lock"):
        assert kept_out not in allowed


def test_every_copy_comes_from_the_context_and_none_is_a_simulator_or_test() -> None:
    sources = [
        word
        for line in DOCKERFILE.splitlines()
        if line.startswith("COPY") and "--from=" not in line
        for word in line.split()[1:-1]
    ]
    assert sources, "the Dockerfile copies the product"
    allowed = _allowlist() | {"."}  # "." is the whole context, which the allowlist bounds
    assert all(source.rstrip("/") in allowed for source in sources), sources
    assert not {"sim", "tests", "bench"} & {source.rstrip("/") for source in sources}


def test_packages_come_from_the_lock_with_hashes_and_the_project_adds_none() -> None:
    instructions = DOCKERFILE.replace("\\\n", " ").splitlines()  # continuation lines joined
    installs = [line for line in instructions if "pip install" in line]
    assert any("--require-hashes" in line and "requirements.lock" in line for line in installs)
    assert all("--no-deps" in line for line in installs)


def test_both_stages_use_the_same_base() -> None:
    bases = re.findall(r"^FROM (\S+)", DOCKERFILE, flags=re.M)
    assert len(bases) == 2 and bases[0] == bases[1]


def test_the_default_base_is_pinned_by_digest() -> None:
    default = re.search(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE, flags=re.M)
    assert default, "the Dockerfile takes ARG BASE_IMAGE with a default"
    assert re.fullmatch(r"python:3\.1[1-3][\d.]*-slim-\w+@sha256:[0-9a-f]{64}", default.group(1))
    assert re.findall(r"^FROM (\S+)", DOCKERFILE, flags=re.M)[0] == "${BASE_IMAGE}"
