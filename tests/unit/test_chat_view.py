"""The chat reply is short: the answer first, a long one continued in a file with a line saying so, every
fact in the facts file, and a typo or unknown name said before the answer."""

from __future__ import annotations

from bot.chat.asks import Suggestion
from bot.chat.subjects import Subjects
from bot.views.chat import ANSWER_FILE, ANSWER_SHOWN_CHARS, FACTS_FILE, Answer, Shown, chat_reply
from llm.grounding import Fact, Scope


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


def test_a_fact_about_another_subject_than_the_questions_says_so() -> None:
    scope = Scope(frozenset({"gemma4-old"}), {"gemma4-qr": frozenset({"gemma4-qr"})})
    own = Fact("describe gemma4-old", "`gemma4-old`: *FAILED*", about=("gemma4-old",))
    other = Fact("vLLM container", "`vllm` is running", about=("gemma4-qr",))
    general = Fact("names in the question", "`gemma4-odl` read as `gemma4-old`")
    facts = [own, other, general]
    reply = chat_reply(
        Subjects(("gemma4-old",), "question"),
        facts,
        Shown(facts=facts),
        [],
        [],
        None,
        "rules only",
        None,
        "",
        [],
        None,
        scope,
    )
    lines = reply.text.splitlines()
    assert "• `gemma4-old`: *FAILED*" in lines
    assert (
        "• _vLLM container_: `vllm` is running _(about `gemma4-qr`, not what the question asks about)_"
        in lines
    )
    assert "• _names in the question_: `gemma4-odl` read as `gemma4-old`" in lines
    facts_file = str(next(f for f in reply.files if f.filename == FACTS_FILE).content)
    assert "## vLLM container (about `gemma4-qr`)" in facts_file
