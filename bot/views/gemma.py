"""Gemma's answers as Slack blocks: the answer and its author, its stats (/gemma stats), and the rated
answers (/gemma feedback); the verdicts an answer can be rated with."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from bot.slack.render import Block, Reply, blocks_reply, channel_link, context, section, utc
from bot.views.metrics import ms
from llm.agent import SUGGEST_TOOL, empty_explanation, inspect_message
from llm.claims import check_answer
from llm.client import CUT_NOTE, StreamResult
from ops.store.state import AnswerRecord

# What a Helpful / Not helpful button records (`/gemma rate ID VERDICT`).
VERDICTS = ("helpful", "not-helpful")


def answer_blocks(result: StreamResult, model: str, parses: Callable[[str], bool]) -> list[Block]:
    """The answer without tool-call markup, chat-template tokens, shell commands, echoes or loops
    (`llm.claims.check_answer` with no facts: the prompt was passed through as typed, so no claim in it is
    checked, and the byline says so); an empty one is explained, never left blank.

    Args:
        result: the streamed completion.
        model: the model that wrote it.
        parses: whether a line is one of this bot's commands (`bot.handlers.chat.command_parses`).
    """
    raw = inspect_message(result.text).text
    checked = check_answer(raw, None, parses=parses, cut=result.finish_reason == "length")
    text = checked.text or (
        f"The model's answer was withheld: {checked.withheld}."
        if raw
        else empty_explanation(model, result.finish_reason, result.completion_tokens)
    )
    byline = f"written by `{model}` (primary endpoint) · unchecked: no facts were read for a prompt"
    if checked.removed:
        byline += " · removed: " + "; ".join(dict.fromkeys(r.shown for r in checked.removed))
    blocks: list[Block] = [section(text[:2900]), context(byline)]
    if result.finish_reason == "length":
        blocks.append(context("_Stopped at the token limit (--max-tokens)._"))
    if result.cut:
        blocks.append(context(f"_{CUT_NOTE[0].upper()}{CUT_NOTE[1:]}; the rest was not read._"))
    return blocks


def stats_blocks(result: StreamResult, url: str, model: str, parses: Callable[[str], bool]) -> list[Block]:
    """The answer, then TTFT, TPOT, output tokens/s and token counts, then where they come from."""
    rate = "-" if result.output_tokens_per_s is None else f"{result.output_tokens_per_s:,.1f} tok/s"
    stats = (
        f"*TTFT* {ms(result.ttft_s)} · *TPOT* {ms(result.tpot_s)} · *output* {rate} · "
        f"*tokens* prompt {result.prompt_tokens if result.prompt_tokens is not None else '-'}, "
        f"completion {result.completion_tokens if result.completion_tokens is not None else '-'} · "
        f"*total* {ms(result.total_s)}"
    )
    blocks = [*answer_blocks(result, model, parses), section(stats)]
    note = result.note or "counts from the server's usage chunk"
    blocks.append(context(f"{note} · `{url}` · finish_reason {result.finish_reason}"))
    return blocks


def given_labels(stored: tuple[str, ...], commands: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """What a rated answer was given, as its answer showed it: the facts' sources (the byline's "based on"
    labels) and the commands its tool calls ran.

    Args:
        stored: `AnswerRecord.tools` as stored (the facts' sources, then the tool names, joined by "," and
            read back split at every comma, so "queued resources in us-east5-a, asia-northeast1-b" comes
            back in two pieces, the second starting with the space a label writes after its comma).
        commands: chat tool name -> the command line it runs, e.g. {"logs": "/logs --severity ERROR"};
            `llm.agent.SUGGEST_TOOL` is absent: it runs nothing (it proposes a command to the asker).

    Returns:
        (facts' sources, commands run), each in the order given, without repeats.
    """
    labels: list[str] = []
    for piece in stored:
        if piece.startswith(" ") and labels:  # a label's own ", ": glue it back to the label it came from
            labels[-1] += "," + piece
        else:
            labels.append(piece)
    facts = [label for label in labels if label not in commands and label != SUGGEST_TOOL]
    ran = [commands[label] for label in labels if label in commands]
    return list(dict.fromkeys(facts)), list(dict.fromkeys(ran))


def feedback_blocks(
    records: list[AnswerRecord], commands: Mapping[str, str], *, every_channel: bool = False
) -> list[Block]:
    """Ratings, newest first (one line per user's verdict): verdict, when, model, the question and what the
    model was given (`given_labels`: the facts' sources as the answer's byline named them, and the commands
    its tools ran); with `every_channel`, the channel each answer was given in."""
    helpful = sum(r.verdict == "helpful" for r in records)
    lines = []
    for r in records:
        facts, ran = given_labels(r.tools, commands)
        given = "; ".join(facts) or "no facts"
        if ran:
            given += " · ran " + ", ".join(f"`{line}`" for line in ran)
        lines.append(
            f"• {':thumbsup:' if r.verdict == 'helpful' else ':thumbsdown:'} {utc(r.rated_at)} `{r.model}`"
            + (f" in {channel_link(r.channel_id)}" if every_channel else "")
            + f": _{r.question[:150]}_ (based on: {given})"
        )
    where = " (every channel; shown only to you)" if every_channel else ""
    summary = f"*{helpful} of {len(records)} ratings helpful*{where}"
    return [section(summary + "\n" + "\n".join(lines))]


def streaming(tail: str) -> Reply:
    """The progress message of an answer still streaming: its latest `tail` and a "generating" line."""
    return Reply(
        text=tail + " …", blocks=[section(tail + " …"), context(":hourglass_flowing_sand: generating…")]
    )


def rated(model: str, verdict: str | None) -> Reply:
    """`/gemma rate`'s thanks: the verdict recorded on an answer by `model`."""
    return blocks_reply(
        [context(f"Thanks: your verdict on this answer by `{model}` is recorded as *{verdict}*.")]
    )


def no_ratings(in_this_channel: bool) -> Reply:
    """`/gemma feedback` when nothing was rated yet (in this channel, or anywhere for an admin)."""
    where = " in this channel" if in_this_channel else ""
    return blocks_reply(
        [section(f"No rated answers yet{where}: Gemma's answers carry Helpful / Not helpful buttons.")]
    )
