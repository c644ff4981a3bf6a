"""The chat reply is short: the answer first, a long one continued in a file with a line saying so, every
fact in the facts file, and a typo or unknown name said before the answer."""

from __future__ import annotations

from bot.chat.asks import Suggestion
from bot.chat.subjects import Subjects
from bot.views.chat import ANSWER_FILE, ANSWER_SHOWN_CHARS, FACTS_FILE, Answer, Shown, chat_reply
from llm.grounding import Fact


def _reply(
    text: str, subjects: Subjects | None = None, offered: Suggestion | None = None
) -> tuple[str, dict[str, str]]:
    facts = [Fact("describe gemma4-old", "`gemma4-old`: *FAILED*", "full describe text")]
    reply = chat_reply(
        subjects or Subjects(("gemma4-old",), "question"),
        facts,
        Shown(facts=facts),
        [],
        [],
        Answer(text, "written by `m` (primary endpoint)"),
        "",
        offered,
        "",
        [],
        (),
    )
    return reply.text, {f.filename: str(f.content) for f in reply.files}


def test_a_long_answer_shows_its_start_and_continues_in_a_file() -> None:
    answer = "\n".join(f"line {i}: " + "x" * 70 for i in range(100))
    text, files = _reply(answer)
    assert len(text) < 4000 and files[ANSWER_FILE] == answer
    assert f"characters shown; the rest is in `{ANSWER_FILE}`" in text
    assert text.index("line 0:") < text.index("*Facts*")


def test_a_short_answer_is_whole_and_every_fact_is_in_the_facts_file() -> None:
    text, files = _reply("gemma4-old FAILED: a stockout.")
    assert "gemma4-old FAILED: a stockout." in text and ANSWER_FILE not in files
    assert "## describe gemma4-old\n`gemma4-old`: *FAILED*\nfull describe text" in files[FACTS_FILE]
    assert len("gemma4-old FAILED: a stockout.") < ANSWER_SHOWN_CHARS


def test_names_not_resolved_lead_and_a_refused_offer_says_why() -> None:
    subjects = Subjects((), "")
    text, _ = _reply("answer", subjects, Suggestion(None, ("`--force`: not here",), "which queued resource?"))
    assert "No command offered: which queued resource?." not in text
    assert (
        "No command offered: which queued resource?" in text and "Not acted on: `--force`: not here" in text
    )
