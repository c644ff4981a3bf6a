"""README.md reads in five minutes: at most 15,000 bytes, the two commands CI and a newcomer run, and links
that lead somewhere (README.md, docs/ and bench/README.md link only to files that exist)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_BYTES = 15_000
# [text](target): a relative target, without its #anchor (absolute URLs and bare anchors are not files).
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
# Code (fenced blocks, then inline spans) is left out: a regex in it may look like a link.
_CODE = re.compile(r"```.*?```|``.*?``|`[^`\n]*`", re.DOTALL)


def test_readme_is_short() -> None:
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes, over {MAX_BYTES}: move detail into docs/"


def test_readme_gives_the_two_commands() -> None:
    text = README.read_text()
    assert "make demo" in text and "make test" in text  # .ci/run runs the test command README gives


PAGES = [README, ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_files(page: Path) -> None:
    prose = _CODE.sub("", page.read_text())
    targets = [t for t in _LINK.findall(prose) if "://" not in t and not t.startswith("mailto:")]
    missing = [t for t in targets if not (page.parent / t).exists()]
    assert missing == [], f"{page.relative_to(ROOT)} links to missing files: {missing}"
