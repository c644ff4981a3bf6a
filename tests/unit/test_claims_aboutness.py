"""The check of what an answer is about (`llm.claims.check_answer` with a `Scope`): a sentence or quoted block
about the question's subject may rest only on evidence about that subject or on general evidence; one that
rests on another subject's evidence is removed and said, unless it names that subject plainly.

The world: deployment production (gemma4-qr serving vLLM on gemma4-qr-node, gemma4-old FAILED with no node,
gemma4-standby waiting) and deployment staging (gemma4-staging on gemma4-staging-node)."""

from __future__ import annotations

import pytest

import bot.handlers  # noqa: F401  (declares every command on the registry)
from bot.chat.subjects import Known, Subjects, scope_of
from bot.commands.registry import registry
from llm.agent import FACTS_PROMPT, SYSTEM_PROMPT
from llm.claims import Checked, check_answer
from llm.grounding import Evidence, Scope, segments

KNOWN = Known(
    {"gemma4-qr": ["gemma4-qr-node"], "gemma4-old": ["gemma4-old-node"], "gemma4-standby": []},
    "production",
    "gemma4-qr",
    {"staging": {"gemma4-staging": ["gemma4-staging-node"]}},
)
QR_LINES = (
    "12-06 01:15:16 ERRO gemma4-qr-node ValueError: 'max_tokens' or 'max_completion_tokens' is too big: 8192",
    "12-06 01:15:14 ERRO gemma4-qr-node jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: HBM 31.75G of 32G",
    "12-06 01:10:02 ERRO gemma4-qr-node RuntimeError: TPU device busy (held by pid 4242)",
)
EVIDENCE = [
    Evidence(
        "known failures now (the bot's catalogue)\ntpu-stockout: no TPU capacity left in europe-west4-a "
        "right now (a stockout, transient) Fix: recover it (/tpu recover gemma4-old --search)",
        frozenset({"gemma4-old"}),
    ),
    Evidence(
        "describe gemma4-old\n`gemma4-old`: *FAILED* (by SERVICE) in zone `europe-west4-a`, v6e-8 spot; "
        'error: There is no more capacity in the zone "europe-west4-a" (stockout, transient)',
        frozenset({"gemma4-old"}),
    ),
    Evidence("errors in the last 1h on gemma4-old-node\nno ERROR entries", frozenset({"gemma4-old"})),
    Evidence(
        "queued resources in us-east5-a, europe-west4-a\n`gemma4-qr`: *ACTIVE* in zone `us-east5-a`, v6e-8 "
        "flex-start, node gemma4-qr-node READY, terminates in 2h 29m\n• `gemma4-standby`: "
        "*WAITING_FOR_RESOURCES* in zone `asia-northeast1-b`, v6e-8 flex-start",
        frozenset({"gemma4-qr", "gemma4-standby"}),
    ),
    Evidence(
        "vLLM at http://10.0.0.2:8000\n/health ready (25 ms); TTFT p95 424 ms; KV cache usage 30.0%",
        frozenset({"gemma4-qr"}),
    ),
    Evidence(
        "[logs of `gemma4-qr-node`, asked for by name: not what the question is about]\n*3 entries*, newest "
        "first\n" + "\n".join(QR_LINES),
        frozenset({"gemma4-qr"}),
    ),
    Evidence(
        "errors in the last 1h on gemma4-qr-node: earlier failures\n"
        "hf-gated-repo-401: Hugging Face 401 at 00:34",
        frozenset({"gemma4-qr"}),
        now=False,
    ),
    Evidence(
        "deployment staging (as /fleet shows it)\n`gemma4-staging` ACTIVE · `us-east5-b` · v6e-4 flex-start; "
        "vLLM ready (57 ms) · KV cache 12%; Cost at most $10.80/h",
        frozenset({"staging"}),
    ),
    Evidence(
        "vLLM at http://10.0.1.2:8000\n/health ready (31 ms); TTFT p95 2,310 ms; 14 requests waiting",
        frozenset({"gemma4-staging"}),
    ),
    Evidence("price table\nv6e spot in europe-west4: $0.98 per chip-hour"),
]
PROMPT = SYSTEM_PROMPT + "\n" + FACTS_PROMPT


def _subjects(**fields: object) -> Subjects:
    values: dict[str, object] = {"resources": (), "origin": "question", **fields}
    return Subjects(**values)  # type: ignore[arg-type]


ABOUT_OLD = scope_of(KNOWN, _subjects(resources=("gemma4-old",)))
ABOUT_STAGING = scope_of(KNOWN, _subjects(deployments=("staging",), origin=""))
ABOUT_PRODUCTION = scope_of(KNOWN, _subjects(resources=("gemma4-qr",), origin="channel deployment"))
ABOUT_OLD_FROM_THREAD = scope_of(KNOWN, _subjects(resources=("gemma4-old",), origin="thread"))


def check(text: str, scope: Scope = ABOUT_OLD, **options: object) -> Checked:
    return check_answer(
        text,
        EVIDENCE,
        parses=registry.starts_with_command,
        prompt=PROMPT,
        scope=scope,
        **options,  # type: ignore[arg-type]
    )


def _told_as(checked: Checked) -> list[str]:
    return [r.why for r in checked.removed if " told as about " in r.why]


def test_the_reported_answer_loses_the_other_nodes_log_lines_and_says_so() -> None:
    """The defect as reported: 'why did gemma4-old fail?' answered with gemma4-qr-node's ERROR lines."""
    quote = "\n".join(QR_LINES)
    got = check(f"Based on the tool result: *3 entries*, newest first\n```\n{quote}\n```")
    assert "gemma4-qr-node" not in got.text and "8192" not in got.text
    assert "a quoted block about `gemma4-qr` told as about `gemma4-old`" in _told_as(got)
    assert "checked" not in got.summary()  # nothing posted rests on facts about gemma4-old


@pytest.mark.parametrize(
    "answer",
    [
        "gemma4-old failed with:\n```\n{quote}\n```",
        "What broke on gemma4-old:\n```\n{quote}\n```",
        "It is down because of these errors:\n```\n{quote}\n```",
        "gemma4-old is down; see the errors:\n```\n{quote}\n```",
    ],
)
def test_other_nodes_log_lines_quoted_as_the_subjects_are_removed_whatever_the_wording(answer: str) -> None:
    got = check("gemma4-old is FAILED in europe-west4-a. " + answer.format(quote="\n".join(QR_LINES[:2])))
    assert got.text.startswith("gemma4-old is FAILED in europe-west4-a.") and "gemma4-qr-node" not in got.text
    assert _told_as(got) == ["a quoted block about `gemma4-qr` told as about `gemma4-old`"]
    assert got.summary().startswith("checked: 2 claims found in the facts for `gemma4-old`")


def test_other_nodes_log_lines_pasted_as_prose_are_quotes_all_the_same() -> None:
    """A log line names its node in a column: copied whole into the answer, it is a quote, told about what
    the sentence before it says."""
    got = check("gemma4-old is FAILED in europe-west4-a. Here is why:\n" + "\n".join(QR_LINES[:2]))
    assert "gemma4-qr-node" not in got.text
    assert _told_as(got) == ["facts about `gemma4-qr` told as about `gemma4-old`"] * 2
    assert got.withheld.startswith("most of it told facts about other subjects as the one asked about")


def test_the_same_lines_told_as_the_other_nodes_are_kept() -> None:
    text = f"gemma4-old is FAILED. For comparison, gemma4-qr-node logged:\n```\n{QR_LINES[0]}\n```"
    got = check(text)
    assert QR_LINES[0] in got.text and not got.removed
    assert got.summary() == (
        "checked: 1 claim found in the facts for `gemma4-old`, 1 claim and 1 quoted block in those about "
        "`gemma4-qr`"
    )


@pytest.mark.parametrize(
    "sentence",
    [
        "It ran out of HBM: 31.75G of 32G.",  # names nothing: about gemma4-old
        "gemma4-old failed because max_tokens 8192 is too large.",  # names it, with another node's number
        "The TTFT p95 is 424 ms.",  # production's vLLM, told as gemma4-old's
        "It is in us-east5-a.",  # gemma4-qr's zone
        "It failed at 01:15.",  # the time of another node's log line
    ],
)
def test_another_resources_numbers_told_as_the_subjects_are_removed(sentence: str) -> None:
    got = check(f"gemma4-old is FAILED in europe-west4-a. {sentence}")
    assert got.text == "gemma4-old is FAILED in europe-west4-a."
    assert _told_as(got) and _told_as(got)[0].startswith("facts about `gemma4-qr`")
    assert _told_as(got)[0].endswith(" told as about `gemma4-old`")
    assert got.removed[0].shown == got.removed[0].why  # said in one line, naming subjects, not the claim


@pytest.mark.parametrize(
    "sentence",
    [
        "gemma4-qr-node logged max_tokens 8192 errors.",
        "For comparison, gemma4-qr serves with a TTFT p95 of 424 ms in us-east5-a.",
        "staging's vLLM answers in 57 ms.",  # a deployment named plainly covers its resources
    ],
)
def test_another_subject_named_plainly_may_rest_on_its_own_facts(sentence: str) -> None:
    got = check(f"gemma4-old is FAILED. {sentence}")
    assert got.text.endswith(sentence) and not got.removed, got.removed
    # counted as found in the other subject's facts, never as the question's
    other = "`staging`" if "staging" in sentence else "`gemma4-qr`"
    assert got.summary().startswith("checked: 1 claim found in the facts for `gemma4-old`, ")
    assert got.summary().endswith(f" in those about {other}") and not got.unanswered and not got.strayed


def test_general_facts_and_the_subjects_own_hold_anything_about_it() -> None:
    text = (
        "gemma4-old is a v6e-8 spot in europe-west4-a. A v6e spot chip costs $0.98 per chip-hour in "
        "europe-west4. Recover it with `/tpu recover gemma4-old --search`."
    )
    got = check(text)
    assert got.text == text and not got.removed
    assert got.summary().startswith("checked: ") and "for `gemma4-old`" in got.summary()


def test_a_question_about_a_deployment_holds_its_vllm_not_anothers() -> None:
    """'why is staging's vLLM slow?': production's latency told as staging's goes; staging's stays."""
    got = check(
        "staging's vLLM is slow: its TTFT p95 is 2,310 ms with 14 requests waiting. The TTFT p95 is 424 ms.",
        ABOUT_STAGING,
    )
    assert got.text == "staging's vLLM is slow: its TTFT p95 is 2,310 ms with 14 requests waiting."
    assert _told_as(got) == ["facts about `gemma4-qr` told as about `staging`"]
    assert "found in the facts for `staging`" in got.summary()


def test_a_deployment_question_may_cite_its_resources_and_another_deployment_named_plainly() -> None:
    text = "gemma4-staging costs at most $10.80/h. production answers in 25 ms, staging in 57 ms."
    got = check(text, ABOUT_STAGING)
    assert got.text == text and not got.removed


def test_mixed_answer_keeps_the_subjects_facts_and_drops_the_rest() -> None:
    text = (
        "gemma4-old is FAILED: no capacity left in europe-west4-a. Its KV cache usage is 30.0%.\n"
        f"The errors:\n```\n{QR_LINES[2]}\n```\nRecover it with `/tpu recover gemma4-old --search`."
    )
    got = check(text)
    assert got.text == (
        "gemma4-old is FAILED: no capacity left in europe-west4-a. "
        "Recover it with `/tpu recover gemma4-old --search`."
    )
    assert _told_as(got) == [
        "facts about `gemma4-qr` told as about `gemma4-old`",
        "a quoted block about `gemma4-qr` told as about `gemma4-old`",
    ]
    assert "removed: facts about `gemma4-qr` told as about `gemma4-old`; a quoted block" in got.summary()


def test_an_answer_mostly_about_another_subject_is_withheld() -> None:
    got = check("It failed at 01:15. The TTFT p95 is 424 ms. Its zone is us-east5-a. gemma4-old is FAILED.")
    assert got.text == "" and got.withheld.startswith("most of it told facts about other subjects")
    assert "checked" not in got.summary()


def test_a_question_about_the_channels_deployment_may_quote_any_of_its_nodes() -> None:
    """'any errors in the logs?' names nothing: the whole deployment is the subject."""
    text = f"The newest errors:\n```\n{QR_LINES[0]}\n```"
    got = check(text, ABOUT_PRODUCTION)
    assert got.text == text and not got.removed
    assert "1 quoted block found in the facts for `production`" in got.summary()


def test_a_subject_from_the_thread_is_held_the_same() -> None:
    got = check("It is in us-east5-a.", ABOUT_OLD_FROM_THREAD)
    assert got.text == "" and _told_as(got)


def test_an_earlier_event_told_as_current_is_removed_even_with_current_failures() -> None:
    got = check("gemma4-qr-node still fails with hf-gated-repo-401.", ABOUT_PRODUCTION)
    assert got.text == ""
    assert got.removed[0].why == "it tells an earlier failure as current; the facts say it is not"
    told = check("gemma4-qr-node had hf-gated-repo-401 at 00:34, before this container.", ABOUT_PRODUCTION)
    assert told.text and not told.removed


def test_without_a_scope_nothing_is_held_to_a_subject() -> None:
    """The check before this family was fixed: the other node's lines pass as 'found in the facts'."""
    quote = "\n".join(QR_LINES)
    got = check(f"The errors:\n```\n{quote}\n```", Scope())
    assert quote in got.text and got.summary() == "checked: 1 quoted block found in the facts"


def test_segments_give_a_listings_continuation_lines_to_the_resource_above() -> None:
    dashboard = Evidence(
        "TPU / vLLM status\n*gemma4-qr* (primary) ACTIVE\nv6e-8 · created 1h 30m ago\n*gemma4-old* FAILED\n"
        "v6e-8 · spot · created 1d 2h ago",
        frozenset({"production"}),
    )
    runs = [(run.text.splitlines()[0], sorted(run.about)) for run in segments([dashboard], ABOUT_OLD)]
    assert runs == [
        ("TPU / vLLM status", ["gemma4-old", "gemma4-qr", "gemma4-standby", "production"]),
        ("*gemma4-qr* (primary) ACTIVE", ["gemma4-qr"]),
        ("*gemma4-old* FAILED", ["gemma4-old"]),
    ]
    single = segments(
        [Evidence("describe gemma4-old\nheld by gemma4-qr\nno node", frozenset({"gemma4-old"}))], ABOUT_OLD
    )
    assert [sorted(run.about) for run in single] == [["gemma4-old"], ["gemma4-qr"], ["gemma4-old"]]


PEER_LINE = (
    "12-06 01:20:00 ERRO gemma4-qr-node RuntimeError: peer gemma4-old-node: HBM OOM, 47.5 GiB requested"
)
PEER_LOGS = Evidence(
    "[logs of `gemma4-qr-node`, asked for by name: not what the question is about]\n*1 entry*\n" + PEER_LINE,
    frozenset({"gemma4-qr"}),
    logged=True,
)
PEER_ERRORS = Evidence(  # the errors fact: templates, without their node column
    "errors in the last 1h on gemma4-qr-node\n1 ERROR entries; top: 1× `RuntimeError: peer gemma4-old-node: "
    "HBM OOM, 47.5 GiB requested`",
    frozenset({"gemma4-qr"}),
    logged=True,
)


@pytest.mark.parametrize("logs", [PEER_LOGS, PEER_ERRORS])
@pytest.mark.parametrize(
    "sentence",
    [
        "gemma4-old failed because HBM ran out: 47.5 GiB requested.",
        "It requested 47.5 GiB of HBM.",
        "gemma4-old-node ran out of HBM at 47.5 GiB.",
        "gemma4-old's node logged an HBM OOM of 47.5 GiB.",
    ],
)
def test_a_log_line_is_about_the_node_that_logged_it_not_the_names_it_carries(
    logs: Evidence, sentence: str
) -> None:
    got = check_answer(
        f"gemma4-old is FAILED in europe-west4-a. {sentence}",
        [*EVIDENCE, logs],
        parses=registry.starts_with_command,
        prompt=PROMPT,
        scope=ABOUT_OLD,
    )
    assert got.text == "gemma4-old is FAILED in europe-west4-a.", got.summary()
    assert _told_as(got) == ["facts about `gemma4-qr` told as about `gemma4-old`"]


def test_the_logging_node_named_plainly_keeps_its_line() -> None:
    text = "gemma4-old is FAILED. gemma4-qr-node logged a peer's HBM OOM of 47.5 GiB."
    got = check_answer(
        text, [*EVIDENCE, PEER_LOGS], parses=registry.starts_with_command, prompt=PROMPT, scope=ABOUT_OLD
    )
    assert got.text == text and not got.removed


def test_segments_of_every_nodes_logs_follow_each_lines_node_column() -> None:
    every = Evidence(
        "[logs of deployment `production`]\n"
        f"{PEER_LINE}\n  continued: peer gemma4-old-node\n"
        "12-06 01:21:00 ERRO gemma4-old-node RuntimeError: TPU device busy",
        frozenset({"production"}),
        logged=True,
    )
    runs = [(run.text.splitlines()[0][:20], sorted(run.about)) for run in segments([every], ABOUT_OLD)]
    assert runs[1:] == [("12-06 01:20:00 ERRO ", ["gemma4-qr"]), ("12-06 01:21:00 ERRO ", ["gemma4-old"])]


ABOUT_BOTH = scope_of(KNOWN, _subjects(resources=("gemma4-old", "gemma4-qr")))


@pytest.mark.parametrize(
    "text",
    [
        "gemma4-qr is ACTIVE in us-east5-a.",
        # the simulated model's form: a sentence naming nothing and claiming nothing tells of no one
        "No model ran. Read from the listing: gemma4-qr is ACTIVE in `us-east5-a`.",
    ],
)
def test_an_answer_only_about_another_resource_is_not_the_answer(text: str) -> None:
    """'is gemma4-old healthy?' answered with gemma4-qr's state: nothing of it is about gemma4-old, so it is
    withheld, saying about whom it was, and nothing is counted as checked for gemma4-old."""
    got = check(text)
    assert got.text == "" and got.strayed == "`gemma4-qr`"
    assert got.withheld == "it was about `gemma4-qr`, not `gemma4-old` the question asks about"
    assert "checked" not in got.summary() and "gemma4-old" not in got.summary()


def test_a_deployment_question_answered_with_another_deployments_facts_is_not_the_answer() -> None:
    got = check("production's vLLM answers in 25 ms.", ABOUT_STAGING)
    assert got.text == "" and got.strayed == "`production`"
    assert got.withheld == "it was about `production`, not `staging` the question asks about"


def test_a_question_about_two_resources_answered_about_one_says_so() -> None:
    got = check("gemma4-qr is ACTIVE in us-east5-a.", ABOUT_BOTH)
    assert got.text == "gemma4-qr is ACTIVE in us-east5-a." and got.unanswered == "`gemma4-old`"
    assert (
        got.summary()
        == "checked: 2 claims found in the facts for `gemma4-qr` · nothing in it about `gemma4-old`"
    )
    both = check("gemma4-qr is ACTIVE in us-east5-a. gemma4-old is FAILED in europe-west4-a.", ABOUT_BOTH)
    assert not both.unanswered and not both.strayed


def test_a_sentence_naming_nothing_is_about_the_question() -> None:
    got = check("It has no capacity in europe-west4-a.")
    assert got.text and not got.strayed and not got.unanswered
    assert got.summary() == "checked: 1 claim found in the facts for `gemma4-old`"
