"""Claims however they are written: the check reads an answer as it reads (look-alike and zero-width
characters, full-width digits folded), names in any case and with a possessive, numbers with a hyphen."""

from __future__ import annotations

import pytest

from llm.grounding import canonical_text, contradictions
from tests.unit.test_claims_aboutness import check

STATES = {"gemma4-old": "FAILED", "gemma4-qr": "ACTIVE", "gemma4-qr-node": "READY"}
TRUE = "gemma4-old is FAILED in europe-west4-a."


@pytest.mark.parametrize(
    "name",
    [
        "gemma4-\u200bold",  # zero-width space
        "gemma4-\u043eld",  # Cyrillic o
        "gemma4\u2011old",  # non-breaking hyphen
        "gemma4\u2010old",  # hyphen
        "gemma4\u2212old",  # minus sign
        "gemma4-o\u00adld",  # soft hyphen
        "gemma4-\u03bfld",  # Greek omicron
        "\uff47\uff45\uff4d\uff4d\uff41\uff14-old",  # full-width letters and digit
        "Gemma4-Old",
        "GEMMA4-OLD's",
    ],
)
def test_look_alikes_do_not_hide_a_denied_state(name: str) -> None:
    got = check(f"{name} is ACTIVE and serving traffic.", states=STATES)
    assert got.text == "", (name, got.text)
    assert "it is FAILED" in got.removed[0].why


def test_canonical_text_folds_what_hides_a_name_and_keeps_ascii() -> None:
    assert canonical_text("gemma4\u2011\u200b\u043eld \uff19 GiB") == "gemma4-old 9 GiB"
    assert canonical_text("gemma4-old — it failed") == "gemma4-old — it failed"  # an em dash is prose
    assert canonical_text("plain ascii") == "plain ascii"
    assert contradictions("gemma4-old's node is ACTIVE.", STATES) == [
        "the answer says gemma4-old is ACTIVE; it is FAILED"
    ]


@pytest.mark.parametrize(
    "sentence",
    [
        "Gemma4-backup is READY and can take over its traffic.",
        "GEMMA4-BACKUP can take over its traffic.",
        "It moved to US-EAST1-D yesterday.",
        "It moved to Us-East1-D yesterday.",
        "Its twin in ASIA-SOUTHEAST1 is idle.",
        "The `Gemma4-Backup` resource is READY.",
    ],
)
def test_an_invented_name_zone_or_region_in_any_case_is_checked(sentence: str) -> None:
    got = check(f"{TRUE} {sentence}")
    assert got.text == TRUE, got.summary()
    assert got.removed[0].why.endswith("is not in the facts")


@pytest.mark.parametrize(
    "sentence",
    [
        "It has been down for a 9-hour stretch.",
        "It retried \uff19 times with \uff15\uff10 GiB.",
        "It ran a 17-node slice.",
        "It used \uff13\uff12.\uff15 GiB of HBM.",
    ],
)
def test_numbers_written_with_a_hyphen_or_fullwidth_digits_are_checked(sentence: str) -> None:
    got = check(f"{TRUE} {sentence}")
    assert got.text == TRUE, got.summary()
    assert "a number" in got.removed[0].why


def test_true_claims_in_these_forms_are_kept() -> None:
    text = "Gemma4-Old is FAILED in EUROPE-WEST4-A, a v6e-8 spot with an 8-chip slice of \uff18 chips."
    got = check(text)
    assert got.text == canonical_text(text) and not got.removed, got.removed


@pytest.mark.parametrize(
    "sentence",
    [
        "gemma4-nope's node is healthy and serving traffic normally.",
        "The node of gemma4-nope\u2019s slice is healthy.",
        "Gemma4-Nope is healthy.",
        "gemma4-n\u043epe is healthy.",
    ],
)
def test_an_unknown_name_is_not_repeated_however_it_is_written(sentence: str) -> None:
    got = check(sentence, unknown_names=["gemma4-nope"])
    assert got.text == "", got.text
    assert got.removed[0].why == "`gemma4-nope` names nothing the bot knows"
