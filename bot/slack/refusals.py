"""Slack's refusals, told apart: the error the gateway raises when a call fails even after its fallbacks
(`SlackDeliveryError`), and which refusals sending again cannot fix (`refusal_of`: the channel archived,
unknown or not joined, a scope the token lacks, the token itself refused), with the `needed` and `provided`
scopes Slack adds to `missing_scope`, so the alert job stops sending and says why.

Every Slack call goes through `bot.slack.gateway`, which reads these; nothing here calls Slack.
"""

from __future__ import annotations

from dataclasses import dataclass

from slack_sdk.errors import SlackApiError

# A message Slack refused for its size or blocks: a shorter one goes (chat.postMessage "Errors").
TOO_LONG = frozenset({"msg_too_long", "msg_blocks_too_long", "invalid_blocks", "too_many_blocks"})
# A conversation that refuses the bot itself: the user is answered privately instead.
NOT_HERE = frozenset({"not_in_channel", "channel_not_found", "is_archived", "restricted_action"})
# chat.postMessage errors that the same call cannot get past until someone changes the channel, the app's
# scopes or the token (docs.slack.dev/reference/methods/chat.postMessage#errors). Token refusals hold for
# every channel; the others for the channel named.
TOKEN_REFUSALS = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)
CHANNEL_REFUSALS = frozenset({"is_archived", "channel_not_found", "not_in_channel", "missing_scope"})


class SlackDeliveryError(Exception):
    """Slack refused a call even after the fallbacks. `reason` is Slack's error code (or the exception);
    `needed` and `provided` are the scopes Slack names with `missing_scope` ("" otherwise)."""

    def __init__(self, reason: str, needed: str = "", provided: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.needed = needed
        self.provided = provided


@dataclass(frozen=True)
class Refusal:
    """A Slack refusal that sending again cannot fix (see `refusal_of`).

    Attributes:
        code: Slack's error code, e.g. "is_archived", "missing_scope", "token_revoked".
        needed, provided: for `missing_scope`, the scope the call needs and those the token has (comma
            separated, as Slack sends them); "" otherwise.
    """

    code: str
    needed: str = ""
    provided: str = ""

    @property
    def whole_token(self) -> bool:
        """Whether the refusal is of the token, so it holds for every channel."""
        return self.code in TOKEN_REFUSALS

    @property
    def slack_text(self) -> str:
        """The refusal as slack_sdk prints Slack's answer ("The server responded with: {...}"), the form
        the fault catalogue's Slack families match."""
        answer: dict[str, object] = {"ok": False, "error": self.code}
        if self.needed:
            answer["needed"] = self.needed
        if self.provided:
            answer["provided"] = self.provided
        return f"The server responded with: {answer}"


def refusal_of(exc: BaseException) -> Refusal | None:
    """The Refusal in `exc` (a SlackApiError, or a SlackDeliveryError the gateway raised), or None when
    `exc` is anything else (a rate limit, a 5xx, a message too long...): those pass or are retried."""
    if isinstance(exc, SlackApiError):
        exc = refused(exc)
    if not isinstance(exc, SlackDeliveryError):
        return None
    if exc.reason not in TOKEN_REFUSALS | CHANNEL_REFUSALS:
        return None
    return Refusal(exc.reason, exc.needed, exc.provided)


def error_of(exc: Exception) -> str:
    """Slack's error code of a failed call (or the exception's type and message)."""
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error"))
    return f"{type(exc).__name__}: {exc}"[:300]


def refused(exc: SlackApiError) -> SlackDeliveryError:
    """The SlackDeliveryError of a Web API refusal, with the scopes of a `missing_scope`."""
    response = exc.response
    return SlackDeliveryError(
        error_of(exc), str(response.get("needed") or ""), str(response.get("provided") or "")
    )
