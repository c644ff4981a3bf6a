"""`/gemma ask` and `/gemma stats`: ask the served model; the answer streams into one message.

The message is edited at most once a second (`bot.commands.context.Progress`), however fast tokens arrive.
Stats come
from the streamed `usage` chunk (`stream_options.include_usage`), never from counting chunks.
"""

from __future__ import annotations

from bot.commands.context import Context
from bot.commands.registry import Param, Role, int_range, registry
from bot.shared.serving import explained_when_starting
from bot.slack.render import Reply, blocks_reply
from bot.views.gemma import (
    VERDICTS,
    answer_blocks,
    feedback_blocks,
    no_ratings,
    rated,
    stats_blocks,
    streaming,
)
from llm.client import StreamResult
from ops.linear import linear
from ops.store.state import ANSWER_ID_BYTES

DEFAULT_MAX_TOKENS = 512
PREVIEW_CHARS = 2900  # the tail of a streaming answer its progress message shows (a section holds 3,000)

_PARAMS = (
    Param.option(
        "max_tokens", f"most tokens to generate (default {DEFAULT_MAX_TOKENS})", int_range(1, 8192), "N"
    ),
    Param("prompt", "what to ask", required=True, rest=True, metavar="PROMPT"),
)


def _stream(ctx: Context, prompt: str, max_tokens: int | None) -> tuple[StreamResult, str, str]:
    gemma, endpoint = ctx.services.gemma()
    parts: list[str] = []

    def on_delta(fragment: str) -> None:
        parts.append(fragment)
        # Joined only when the message is edited (at most once a second), and only its tail is shown: a long
        # answer costs one join per edit, not one per fragment.
        if ctx.progress is not None and ctx.progress.due():
            ctx.progress.update(streaming(_tail(parts, PREVIEW_CHARS)))

    with gemma, explained_when_starting(ctx):
        result = gemma.stream(
            [{"role": "user", "content": prompt}],
            max_tokens=max_tokens or DEFAULT_MAX_TOKENS,
            on_delta=on_delta,
        )
    return result, endpoint.url, gemma.model


def _tail(parts: list[str], chars: int) -> str:
    """The last `chars` characters of the fragments joined, reading only as many fragments as needed."""
    taken: list[str] = []
    size = 0
    for part in reversed(parts):
        taken.append(part)
        size += len(part)
        if size >= chars:
            break
    return "".join(reversed(taken))[-chars:]


@registry.command(
    "gemma ask", "Ask the served model; the answer streams into one message", *_PARAMS, asks_model=True
)
def gemma_ask(ctx: Context, max_tokens: int | None, prompt: str) -> Reply:
    result, _, model = _stream(ctx, prompt, max_tokens)
    return blocks_reply(answer_blocks(result, model, ctx.registry.starts_with_command))


@registry.command(
    "gemma stats",
    "Ask, then show TTFT, TPOT, tokens/s and token counts of the answer",
    *_PARAMS,
    asks_model=True,
)
def gemma_stats(ctx: Context, max_tokens: int | None, prompt: str) -> Reply:
    result, url, model = _stream(ctx, prompt, max_tokens)
    return blocks_reply(stats_blocks(result, url, model, ctx.registry.starts_with_command))


def verdict(word: str) -> str:
    """helpful or not-helpful."""
    if word not in VERDICTS:
        raise ValueError(f"{word!r} is not one of {', '.join(VERDICTS)}")
    return word


_ANSWER_ID = linear(rf"^[0-9a-f]{{{2 * ANSWER_ID_BYTES}}}$")


def answer_id(word: str) -> str:
    """An answer's public id: the hex id its Helpful / Not helpful buttons carry (`Store.save_answer`)."""
    if not _ANSWER_ID.match(word):
        raise ValueError(f"{word!r} is not an answer id (the id its buttons carry)")
    return word


def _admin(ctx: Context) -> bool:
    return ctx.caller_role is not None and ctx.caller_role() == Role.ADMIN


@registry.command(
    "gemma rate",
    "Rate a Gemma answer of this channel (what its Helpful / Not helpful buttons run); one verdict per user",
    Param("answer", "the answer id", required=True, kind=answer_id, metavar="ID"),
    Param("verdict", "helpful or not-helpful", required=True, kind=verdict, metavar="VERDICT"),
    writes=True,
)
def gemma_rate(ctx: Context, answer: str, verdict: str) -> Reply:
    """Only answers given in this channel can be rated (an admin may rate any); a user's new verdict
    replaces their own, never another user's."""
    record = ctx.services.store.rate_answer(
        answer,
        verdict.replace("-", " "),
        user_id=ctx.user_id,
        channel_id=None if _admin(ctx) else ctx.channel_id,
        now=ctx.services.now(),
    )
    return rated(record.model, record.verdict)


@registry.command(
    "gemma feedback",
    "Rated Gemma answers of this channel (an admin sees every channel's, privately): verdict, question, "
    "the model and the facts and tools it was given",
    Param.option("last", "how many (default 20)", int_range(1, 200), "N"),
)
def gemma_feedback(ctx: Context, last: int | None) -> Reply:
    """A viewer sees the ratings of answers given in this channel; an admin sees every channel's, in a reply
    only they see (so no channel reads another's questions). Each names what the answer was based on: the
    facts' sources and the commands its tools ran (`/logs --severity ERROR`, not the tool name `logs`)."""
    admin = _admin(ctx)
    records = ctx.services.store.rated_answers(last or 20, channel_id=None if admin else ctx.channel_id)
    if not records:
        return no_ratings(in_this_channel=not admin)
    commands = {tool.name: "/" + command.tool_line({}) for tool, command in ctx.registry.tools()}
    reply = blocks_reply(feedback_blocks(records, commands, every_channel=admin))
    reply.ephemeral = admin
    return reply
