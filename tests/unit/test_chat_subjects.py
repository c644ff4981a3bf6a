"""What a chat question is about: names resolved against the known ones, typos read as or offered, unknown
names said (never replaced by the primary), deployments and the fleet, the thread's subject, the window."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.chat.subjects import BOT, DEFAULT_WINDOW, Known, ThreadMessage, resolve

PRODUCTION = Known(
    {
        "gemma4-qr": ("gemma4-qr-node",),
        "gemma4-standby": ("gemma4-standby-node",),
        "gemma4-old": ("gemma4-old-node",),
    },
    "production",
    "gemma4-qr",
    {"staging": {"gemma4-staging": ("gemma4-staging-node",)}},
    ["google/gemma-4-31B-it"],
)
ALERT = ThreadMessage(":red_circle: `gemma4-old` (europe-west4-a) is FAILED", BOT)


def test_names_in_the_question_win_and_a_node_stands_for_its_queued_resource() -> None:
    subjects = resolve(
        "why did gemma4-old fail? and gemma4-qr-node?", [ThreadMessage("gemma4-standby")], PRODUCTION
    )
    assert subjects.resources == ("gemma4-old", "gemma4-qr")
    assert subjects.origin == "question" and subjects.notes() == []
    assert "logs" in subjects.topics


def test_the_thread_then_the_channel_deployment() -> None:
    thread = resolve(
        "why is it down?", [ThreadMessage("what about gemma4-standby", "U1"), ThreadMessage("ok")], PRODUCTION
    )
    assert thread.resources == ("gemma4-standby",) and thread.origin == "thread"
    assert thread.thread_author == "U1"
    alert = resolve("clean it up", [ALERT], PRODUCTION)
    assert alert.resources == ("gemma4-old",) and alert.thread_author == BOT
    channel = resolve("is vLLM healthy?", [], PRODUCTION)
    assert channel.resources == ("gemma4-qr",) and channel.origin == "channel deployment"
    assert "serving" in channel.topics


def test_a_thread_message_naming_one_resource_wins_over_newer_ones_naming_several() -> None:
    answer = ThreadMessage("gemma4-qr ACTIVE, gemma4-standby WAITING, gemma4-old FAILED", BOT)
    subjects = resolve("delete it", [ALERT, answer], PRODUCTION)
    assert subjects.resources == ("gemma4-old",) and subjects.thread_author == BOT
    only_several = resolve("what about them?", [answer], PRODUCTION)
    assert only_several.resources == ("gemma4-qr", "gemma4-standby", "gemma4-old")
    assert only_several.origin == "thread" and only_several.thread_author == ""


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("gemma4-odl", "gemma4-old"),
        ("gemma4-qt", "gemma4-qr"),
        ("gemma4-stanby", "gemma4-standby"),
        ("gemma4-qr-nod", "gemma4-qr"),
        ("Gemma4-OL", "gemma4-old"),
    ],
)
def test_a_one_letter_typo_keeps_its_subject_and_says_how_it_was_read(typed: str, meant: str) -> None:
    subjects = resolve(f"why did {typed} fail?", [], PRODUCTION)
    assert subjects.resources == (meant,) and subjects.read_as == {typed.lower(): meant}
    assert subjects.notes() == [
        f"`{typed.lower()}` read as `{meant}`: no queued resource is named `{typed.lower()}`"
    ]


def test_an_unknown_name_is_said_and_never_replaced_by_the_primary() -> None:
    subjects = resolve("why did gemma4-nope fail?", [ALERT], PRODUCTION)
    assert subjects.resources == () and subjects.origin == ""
    [unknown] = subjects.unresolved
    assert unknown.sentence().startswith(
        "no queued resource named `gemma4-nope` in `production` (there are `gemma4-qr`, `gemma4-standby`, "
        "`gemma4-old`)"
    )


@pytest.mark.parametrize(
    "question",
    [
        "is gemma4 healthy?",
        "is gemma-4 serving on us-east5-a?",
        "how many v6e-8 chips in us-east5?",
        "is the follow-up flex-start request ok?",
        "errors in the last 45m",
    ],
)
def test_ordinary_words_are_no_names(question: str) -> None:
    subjects = resolve(question, [], PRODUCTION)
    assert subjects.unresolved == () and subjects.read_as == {} and subjects.origin == "channel deployment"


def test_deployments_by_name_by_typo_unknown_and_all() -> None:
    staging = resolve("how is the staging deployment doing?", [], PRODUCTION)
    assert staging.deployments == ("staging",) and staging.resources == ()
    typo = resolve("how is the stagng deployment doing?", [], PRODUCTION)
    assert typo.deployments == ("staging",) and typo.deployment_read_as == {"stagng": "staging"}
    unknown = resolve("how is the qa deployment?", [], PRODUCTION)
    assert unknown.deployments == () and unknown.resources == ()
    assert unknown.notes() == ["no deployment named `qa` (there are `production`, `staging`)"]
    for question in ("how is everything?", "status of all deployments", "the fleet?", "all"):
        assert resolve(question, [], PRODUCTION).deployments == ("production", "staging"), question
    here = resolve("how is production doing?", [], PRODUCTION)
    assert here.deployments == ("production",) and here.resources == ("gemma4-qr",)


def test_a_resource_of_another_deployment_is_found_there() -> None:
    subjects = resolve("is gemma4-staging ok?", [], PRODUCTION)
    assert subjects.elsewhere == {"gemma4-staging": "staging"} and subjects.deployments == ("staging",)
    assert subjects.resources == ()


@pytest.mark.parametrize(
    ("question", "window"),
    [
        ("errors in the last 2 hours?", timedelta(hours=2)),
        ("what failed in the past 30 minutes", timedelta(minutes=30)),
        ("logs since 3d", timedelta(days=3)),
        ("in the last hour", timedelta(hours=1)),
        ("why?", DEFAULT_WINDOW),
    ],
)
def test_time_window(question: str, window: timedelta) -> None:
    assert resolve(question, [], PRODUCTION).window == window


def test_a_thread_about_another_deployments_resource_keeps_that_subject() -> None:
    """One alerts channel for several deployments: a question naming nothing in the thread of staging's
    alert is about gemma4-staging, read in staging, not production's primary."""
    for alert in (
        ":red_circle: *`gemma4-staging` (us-east5-b): ACTIVE -> FAILED*",
        "gemma4-staging-node is unhealthy",
    ):
        for question in ("what broke? any errors?", "why?", "is it back?"):
            subjects = resolve(question, [ThreadMessage(alert, BOT)], PRODUCTION)
            assert subjects.origin == "thread" and subjects.resources == ()
            assert subjects.elsewhere == {"gemma4-staging": "staging"}
            assert subjects.thread_author == BOT
