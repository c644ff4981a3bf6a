"""Rendering stays within Slack's limits: what Slack would reject never leaves the bot."""

from __future__ import annotations

from datetime import timedelta

from bot.slack.render import human_duration, section, split_sections
from sim.slack import block_errors


def test_long_text_is_split_into_valid_sections() -> None:
    text = "\n".join(f"line {i} " + "x" * 90 for i in range(100))
    chunks = split_sections(text)
    assert len(chunks) > 3
    assert all(len(chunk) <= 3000 for chunk in chunks)
    assert "".join(chunks).count("line ") == 100
    assert block_errors([section(c) for c in chunks]) == []


def test_code_fences_are_closed_and_reopened_at_splits() -> None:
    text = "```" + "\n".join("y" * 80 for _ in range(100)) + "```"
    for chunk in split_sections(text):
        assert chunk.count("```") % 2 == 0


def test_a_single_huge_line_is_split() -> None:
    chunks = split_sections("z" * 10000)
    assert all(len(c) <= 3000 for c in chunks) and sum(len(c) for c in chunks) >= 10000


def test_human_duration() -> None:
    assert human_duration(timedelta(hours=2, minutes=5)) == "2h 05m"
    assert human_duration(timedelta(days=1, hours=3)) == "1d 3h"
    assert human_duration(timedelta(seconds=45)) == "45s"
    assert human_duration(timedelta(minutes=-12)) == "-12m"
    assert human_duration(None) == "-"


def test_a_code_span_split_across_sections_is_closed_and_reopened() -> None:
    from bot.slack.render import closing_marks

    chunks = split_sections("`" + "w" * 7000 + "`")
    assert len(chunks) == 3
    assert all(closing_marks(chunk) == "" for chunk in chunks)
    assert all(chunk.startswith("`") and chunk.endswith("`") for chunk in chunks)


def test_a_count_takes_its_noun_in_the_right_number() -> None:
    from bot.slack.render import plural

    assert [plural(n, "zone") for n in (0, 1, 2)] == ["0 zones", "1 zone", "2 zones"]
    assert plural(2, "entry", "entries") == "2 entries"


def test_no_user_text_hedges_its_plural_with_s_in_brackets() -> None:
    """ "2 zone(s)": a count is known when the text is written, so its noun is written in the right number
    (`bot.slack.render.plural`)."""
    from pathlib import Path

    from ops.linear import linear

    hedged = linear(r"[a-z]\(s\)")
    offenders = [
        f"{path}:{number}"
        for root in ("bot", "ops", "llm")
        for path in sorted(Path(root).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if hedged.search(line) and '"' in line and "http(s)" not in line and "name(s)" not in line
    ]
    assert offenders == []
