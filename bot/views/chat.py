"""A chat answer as Slack shows it: short by default.

First what the question's names resolved to when one did not (a typo, an unknown name), then the answer
(the model's text, labelled with who wrote it, or the rules-only note), the change offered behind a Review
button with the asked words it does not carry, and instructions found in data and ignored. Then only the
facts the answer rests on: the subjects' state and error, the known failures that describe the present,
earlier failures as past with their time, the commands just run here, the deployments asked about. Every
fact is in the attached `chat-facts.txt`; a long answer shows its start and continues in `gemma-answer.txt`.
Nothing is cut without a line saying where the rest is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from slack_sdk.models.blocks import ActionsBlock, ButtonElement, PlainTextObject

from bot.chat.asks import Found, Outcome, Suggestion
from bot.chat.subjects import Subjects
from bot.slack.render import (
    Attachment,
    Block,
    Reply,
    as_block,
    blocks_reply,
    context,
    human_duration,
    section,
    split_sections,
)
from bot.views.findings import diagnosis_text
from llm.claims import Checked
from llm.grounding import Fact, Scope
from ops.diagnosis.engine import Diagnosis, Finding
from ops.diagnosis.zonefit import classify
from ops.tpu.model import QueuedResourceInfo

__all__ = [
    "ANSWER_SHOWN_CHARS",
    "Answer",
    "Shown",
    "chat_reply",
    "nothing_asked",
    "resource_line",
    "suggestion_button",
]

ANSWER_SHOWN_CHARS = 1500
"""A model answer longer than this shows its first part (cut at a line) and continues in a file."""
FACTS_FILE = "chat-facts.txt"
ANSWER_FILE = "gemma-answer.txt"


@dataclass
class Shown:
    """What an answer rests on, shown under it (the rest is in the facts file).

    Attributes:
        facts: the facts about the subjects, the state of vLLM and what is missing now.
        earlier: known failures that are not the present state, each with when it was last logged.
        earlier_why: why they are not ("no container runs now: ..."), "" when each conclusion says it.
        recent: commands run in this conversation the question may be about.
        deployments: (deployment, its /fleet lines) for each deployment asked about.
    """

    facts: list[Fact] = field(default_factory=list)
    earlier: list[tuple[Finding, datetime | None]] = field(default_factory=list)
    earlier_why: str = ""
    recent: list[Outcome] = field(default_factory=list)
    deployments: list[tuple[str, list[str]]] = field(default_factory=list)


@dataclass(frozen=True)
class Answer:
    """A model's answer: its checked text, who wrote it, what the check against the facts removed or why
    it withheld the answer (`llm.claims.Checked`), notes (tools looked at, tools refused), and its
    stored id, which its Helpful / Not helpful buttons carry ("" when it was not stored)."""

    text: str
    byline: str
    checked: Checked | None = None
    notes: tuple[str, ...] = ()
    answer_id: str = ""


def suggestion_button(command: str) -> Block:
    """A button that runs the suggested command through the normal role check and confirmation."""
    button = ButtonElement(
        action_id="run_suggested", text=PlainTextObject(text=f"Review {command}"[:75]), value=command
    )
    return as_block(ActionsBlock(block_id="suggestion", elements=[button]))


def feedback_buttons(answer_id: str) -> Block:
    """Helpful / Not helpful buttons; a click runs `/gemma rate ID VERDICT` through the runner."""
    buttons = [
        ButtonElement(
            action_id=f"rate_{verdict.replace('-', '_')}",
            text=PlainTextObject(text=verdict.replace("-", " ").capitalize()),
            value=f"gemma rate {answer_id} {verdict}",
        )
        for verdict in ("helpful", "not-helpful")
    ]
    return as_block(ActionsBlock(block_id="feedback", elements=buttons))


def _answer_blocks(answer: Answer) -> tuple[list[Block], list[Attachment]]:
    """The answer text (its start when long, the whole in a file) or why it was withheld, then the byline:
    who wrote it and what the check against the facts found."""
    blocks: list[Block] = []
    checked = answer.checked
    byline = answer.byline + (f" · {checked.summary()}" if checked and checked.summary() else "")
    if checked is not None and checked.withheld:
        where = "above" if checked.strayed else "below"
        note = (
            f":no_entry_sign: *The model's answer was withheld*: {checked.withheld}. "
            f"The facts {where} are what the bot read."
        )
        return [section(note), context(byline)], []
    text = answer.text.strip() or "(the model wrote nothing)"
    if checked is not None and checked.cut:
        text += " … _(cut: the model stopped at its token limit)_"
    files: list[Attachment] = []
    if len(text) > ANSWER_SHOWN_CHARS:
        shown = split_sections(text, ANSWER_SHOWN_CHARS)[0]
        files.append(Attachment(ANSWER_FILE, text, "The whole answer"))
        byline += (
            f" · :page_facing_up: {len(shown):,} of {len(text):,} characters shown; "
            f"the rest is in `{ANSWER_FILE}`"
        )
        text = shown + " …"
    blocks += [section(text), context(byline)]
    if checked is not None and checked.unanswered:
        blocks.append(
            context(f"It says nothing about {checked.unanswered}: the facts below are what the bot read.")
        )
    return blocks, files


def _offer_blocks(offered: Suggestion | None, refused: str) -> list[Block]:
    """The change offered (Review button) and the asked words it does not act on, or why none is offered."""
    blocks: list[Block] = []
    if offered is not None and offered.command:
        blocks.append(section(f"To do that: `/{offered.command}`. I never act by myself:"))
        blocks.append(suggestion_button(f"/{offered.command}"))
    elif offered is not None:
        end = "" if offered.missing.endswith(("?", ".")) else "."
        blocks.append(section(f"No command offered: {offered.missing}{end}"))
    if offered is not None and offered.not_acted:
        blocks.append(context("Not acted on: " + "; ".join(offered.not_acted)))
    if refused:
        blocks.append(context(refused))
    return blocks


def _instruction_blocks(found: Sequence[Found]) -> list[Block]:
    by_source: dict[str, list[str]] = {}
    for item in found:
        by_source.setdefault(item.source, []).append(f"`{item.snippet}`")
    return [
        section(f":warning: *Instructions found in {source}, ignored*: " + "; ".join(snippets))
        for source, snippets in by_source.items()
    ]


def _rests_on(
    shown: Shown,
    findings: Sequence[Finding],
    failed: Sequence[tuple[QueuedResourceInfo, Diagnosis]],
    scope: Scope,
) -> list[Block]:
    """The facts the answer rests on: failing subjects' state and error, the failures that describe the
    present, the commands just run here, the deployments asked about, earlier failures, then the facts (one
    about another subject than the question's says so)."""
    blocks: list[Block] = []
    for qr, diagnosis in failed:
        heading = f"`{qr.name}` is {qr.state}: its state and error (TPU API)"
        text = diagnosis_text(diagnosis, heading=heading)
        blocks.append(section(text if diagnosis.findings else f"*{heading}*\n{text}"))
    if findings:
        lines = "\n".join(
            f":rotating_light: *{f.name}*: {f.conclusion}\n    _Fix:_ {f.fix}" for f in findings
        )
        blocks.append(section("*Known failures in the log, now*\n" + lines))
    if shown.recent:
        lines = "\n".join(f"• {run.line()}" for run in shown.recent)
        blocks.append(section("*Earlier in this conversation*\n" + lines))
    for name, fleet_lines in shown.deployments:
        blocks.append(section(f"*Deployment {name}* (as `/fleet` shows it)\n" + "\n".join(fleet_lines)))
    if shown.earlier:
        lines = "\n".join(
            f"• *{f.name}*" + (f" at {seen:%H:%M} UTC" if seen else "") + (f": {f.title}" if f.title else "")
            for f, seen in shown.earlier
        )
        why = f" ({shown.earlier_why})" if shown.earlier_why else ""
        blocks.append(section(f"*Earlier failures: not the present state*{why}\n" + lines))
    if shown.facts:
        lines = "\n".join(
            (
                f"• {f.summary}"
                if f.source.startswith(("describe", "queued"))
                else f"• _{f.source}_: {f.summary}"
            )
            + _elsewhere(f, scope)
            for f in shown.facts
        )
        moment = next((f.at for f in shown.facts if f.at is not None and f.now), None)
        when = f" (read at {moment:%H:%M} UTC)" if moment else " (fetched just now)"
        blocks.append(section(f"*Facts*{when}\n" + lines))
    return blocks


def _elsewhere(fact: Fact, scope: Scope) -> str:
    """ " _(about `gemma4-qr`, not what the question asks about)_" for a fact about other subjects than the
    question's, "" otherwise."""
    about = scope.expand(fact.about)
    if scope.about_asked(about):
        return ""
    return f" _(about {scope.label(about)}, not what the question asks about)_"


def _facts_file(facts: Sequence[Fact], scope: Scope) -> Attachment:
    """Every fact: its source, time and subjects, its summary and its full text."""
    parts = []
    for fact in facts:
        when = [fact.when()] if fact.when() else []
        about = [f"about {scope.label(fact.about)}"] if fact.about else []
        head = f"## {fact.source}" + (f" ({'; '.join([*when, *about])})" if when or about else "")
        parts.append("\n".join(filter(None, [head, fact.summary, fact.detail])))
    return Attachment(FACTS_FILE, "\n\n".join(parts) + "\n", "Every fact the answer was given")


def nothing_asked(primary: str) -> Reply:
    """The answer to a mention that asks nothing ("ok", "thanks", "click": `bot.chat.asks.asks_nothing`):
    what the bot can be asked, with examples about `primary` (TPU_PRIMARY; "" for none), and where its
    commands are listed. Nothing is read for it."""
    name = primary or "NAME"
    examples = [
        f"is {name} healthy?",
        "why is vLLM slow?",
        "any errors in the last hour?",
        "what does it cost?",
    ]
    shown = ", ".join(f"`@gemma-bot {example}`" for example in examples)
    return blocks_reply(
        [section(f"Ask me about the deployment, e.g. {shown}."), context("`/tpu help` lists the commands.")]
    )


def resource_line(qr: QueuedResourceInfo, now: datetime) -> str:
    """A queued resource as one line of a chat fact: name, state, zone, accelerator type, provisioning model,
    nodes, time left, the error and what it is (`ops.diagnosis.zonefit.classify`)."""
    initiator = f" (by {qr.state_initiator})" if qr.state_initiator else ""
    nodes = ", ".join(f"node {n.name} {n.state}" + (f" {n.health}" if n.health else "") for n in qr.nodes)
    line = (
        f"`{qr.name}`: *{qr.state}*{initiator} in zone `{qr.zone}`, {qr.accelerator_type} "
        f"{qr.provisioning_model.lower()}" + (f", {nodes}" if nodes else "")
    )
    left = qr.time_left(now)
    if left is not None:
        line += f", terminates in {human_duration(left)} (time left)"
    elif qr.valid_until is not None:
        line += f", request valid for {human_duration(qr.valid_until - now)} more"
    if qr.error:
        reason = classify(qr.error)
        line += f"; error: {' '.join(qr.error.split())[:300]} ({reason.reason}, {reason.kind})"
    return line


def chat_reply(
    subjects: Subjects,
    facts: Sequence[Fact],
    shown: Shown,
    findings: Sequence[Finding],
    failed: Sequence[tuple[QueuedResourceInfo, Diagnosis]],
    answer: Answer | None,
    rules_note: str,
    offered: Suggestion | None,
    refused: str,
    found: Sequence[Found],
    detailed: Sequence[str] | None,
    scope: Scope | None = None,
) -> Reply:
    """The chat reply (see the module docstring).

    Args:
        subjects: what the question was resolved to be about.
        facts: every fact read, most important first.
        shown: what the answer rests on.
        findings: known failures that may describe the present.
        failed: each failing subject and the diagnosis of its state.
        answer: the model's answer, or None when no model answered.
        rules_note: why no model answered ("" when one did).
        offered: the change offered for an ask, None when none was asked.
        refused: a note on a change the model proposed and the bot did not offer ("" for none).
        found: instructions found in data and ignored.
        detailed: the sources whose full text reached the model's prompt; None when no model was asked.
        scope: what the question is about (a fact about something else says so); None: nothing is said.
    """
    blocks: list[Block] = []
    notes = subjects.notes()
    if notes:
        sentences = [note[0].upper() + note[1:] + ("" if note.endswith("?") else ".") for note in notes]
        blocks.append(section(":mag: " + "\n".join(sentences)))
    files: list[Attachment] = []
    rests_on = _rests_on(shown, findings, failed, scope or Scope())
    if answer is not None:
        answer_blocks, files = _answer_blocks(answer)
        # an answer about another subject is not the answer: the subject's own facts lead, then the note
        strayed = answer.checked is not None and bool(answer.checked.strayed)
        blocks += [*rests_on, *answer_blocks] if strayed else answer_blocks
        rests_on = [] if strayed else rests_on
    else:
        blocks.append(section(rules_note))
    blocks += _offer_blocks(offered, refused)
    blocks += _instruction_blocks(found)
    blocks += rests_on
    based = [
        f.source
        + (
            " (summary only in the prompt)"
            if detailed is not None and f.detail and f.source not in detailed
            else ""
        )
        for f in facts
    ]
    if subjects.resources or subjects.origin == "thread":
        based.append(f"subject from the {subjects.origin}")
    line = [
        f"based on: {'; '.join(based)}",
        f"every fact in `{FACTS_FILE}`",
        *(answer.notes if answer else ()),
    ]
    blocks.append(context(" · ".join(line)))
    if answer is not None and answer.answer_id:
        blocks.append(feedback_buttons(answer.answer_id))
    reply = blocks_reply(blocks)
    reply.files.extend([_facts_file(facts, scope or Scope()), *files])
    return reply
