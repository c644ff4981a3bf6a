"""What the bot does when Slack refuses it a channel it was not invited to.

A bot token with `chat:write` (the only write scope the manifest asks for; no `chat:write.public`) posts,
uploads and reads threads only in conversations the bot is a member of. Slack answers `not_in_channel` for
a public channel and `channel_not_found` for a private one or a DM the bot is not part of
(docs.slack.dev/reference/methods/chat.postMessage, "Errors"). A slash command's `response_url` still works
there, so the answer itself arrives, but progress messages, attachments and alerts do not. The bot does not
join by itself (that needs `channels:join` and would put it in channels nobody chose); it says what was lost
and how to invite it, ephemerally through the `response_url` or else in a DM with the user. A file (a chart)
is uploaded to the user's DM with the bot instead, and the ephemeral note says so.
"""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.errors import SlackApiError

from bot.slack.render import channel_link

NOT_MEMBER_ERRORS = frozenset({"not_in_channel", "channel_not_found"})


def not_member(exc: BaseException) -> str | None:
    """The Slack error code when `exc` (a SlackApiError, or the gateway's SlackDeliveryError with its
    `reason`) means the bot is not in the channel, else None."""
    if isinstance(exc, SlackApiError):
        error = str(exc.response.get("error") or "")
    else:
        error = str(getattr(exc, "reason", "") or "")
    return error if error in NOT_MEMBER_ERRORS else None


def invite_hint(channel_id: str) -> str:
    """How to invite the bot to `channel_id` (a one-line mrkdwn hint)."""
    return (
        f"invite me with `/invite @gemma-bot` in {channel_link(channel_id)} (or the channel's details -> "
        "Integrations -> Add apps), then run the command again"
    )


def guidance(channel_id: str, lost: Sequence[str]) -> str:
    """The message telling a user what could not be posted in `channel_id` and how to fix it.

    Args:
        channel_id: the conversation that refused the bot.
        lost: what was not posted there, e.g. ["progress updates", "the file `metrics.txt`"].

    Returns:
        mrkdwn text, one paragraph.
    """
    what = ", ".join(dict.fromkeys(lost)) or "messages"
    return (
        f":warning: I am not a member of {channel_link(channel_id)}, so {what} could not be posted there "
        f"(Slack: `not_in_channel`). To fix it, {invite_hint(channel_id)}."
    )


def sent_to_dm(channel_id: str, filename: str, error: str) -> str:
    """The note telling a user that the file `filename`, refused in `channel_id` with Slack's `error`, was
    uploaded to their direct messages with the bot instead, and how to invite the bot (one mrkdwn line)."""
    return (
        f":warning: I am not a member of {channel_link(channel_id)} (Slack: `{error}`), so I sent the file "
        f"`{filename}` to our direct messages instead. To get files here, {invite_hint(channel_id)}."
    )
