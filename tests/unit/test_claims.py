"""The check between the model and Slack (`llm.claims.check_answer`), by family: true claims kept, invented
names / zones / numbers / times / versions removed, shell commands never shown, the bot's own commands only
when they parse, template tokens, echoed instructions and loops dropped, cut answers marked, and the whole
answer withheld when too little survives."""

from __future__ import annotations

import pytest

import bot.handlers  # noqa: F401  (declares every command on the registry)
from bot.commands.registry import registry
from llm.agent import FACTS_PROMPT, SYSTEM_PROMPT
from llm.claims import check_answer

EVIDENCE = """describe gemma4-old
`gemma4-old`: *FAILED* (by SERVICE) in zone `europe-west4-a`, v6e-8 spot; error: There is no more capacity
in the zone "europe-west4-a" (stockout, transient)
queued resources in us-east5-a, europe-west4-a
`gemma4-qr`: *ACTIVE* in zone `us-east5-a`, v6e-8 on_demand, node gemma4-qr-node READY HEALTHY
live burn
`gemma4-qr` (v6e-8, ON_DEMAND): $12.34 so far over 4.2 h at $21.60/h
vLLM container
`vllm` exited at 04:31 UTC (exit code 137), 3 restarts
vLLM at http://10.0.0.2:8000
/health ready (12 ms); gpu_cache_usage_perc 0.81
"""
STATES = {"gemma4-old": "FAILED", "gemma4-qr": "ACTIVE", "gemma4-qr-node": "READY"}
PARSES = registry.starts_with_command
PROMPT = SYSTEM_PROMPT + "\n" + FACTS_PROMPT


def check(text: str, **kwargs: object):  # type: ignore[no-untyped-def]
    options: dict[str, object] = {"parses": PARSES, "prompt": PROMPT, "states": STATES, **kwargs}
    return check_answer(text, EVIDENCE, **options)  # type: ignore[arg-type]


def test_true_claims_are_kept_and_counted() -> None:
    text = (
        "gemma4-old is FAILED in europe-west4-a: the zone ran out of v6e-8 capacity. "
        "gemma4-qr has cost $12.34 so far at $21.60/h."
    )
    got = check(text)
    assert got.text == text
    assert not got.removed and not got.withheld
    assert got.claims >= 5
    assert "claims found in the facts" in got.summary()


@pytest.mark.parametrize(
    ("sentence", "kind"),
    [
        ("Recreate it in us-west1-b instead.", "a zone"),
        ("Move it to europe-west1 where v5e has room.", "a region"),
        ("Ask for a v5litepod-16 instead.", "an accelerator type"),
        ("It has cost $99.00 so far.", "a price"),
        ("The KV cache is 97% full.", "a number"),
        ("It exited with code 139.", "a number"),
        # a number with any unit, not only the ones this stack prints
        ("It is 18°C in Paris today.", "a number"),
        ("It is 64 °F and sunny.", "a number"),
        ("The region is 350 km away.", "a number"),
        ("Expect 7 retries before it gives up.", "a number"),
        ("That costs €45 a day.", "a price"),
        ("The container stopped at 05:55 UTC.", "a time"),
        ("Upgrade to vLLM 0.9.2 to fix it.", "a version"),
        ("The node gemma4-qr-node-2 is down.", "a name"),
        ("Look at `gemma-prod-7` for the logs.", "a name"),
        ("See https://status.example.com/tpu for the outage.", "a URL"),
        ("Run /tpu nuke everything to start over.", "not a command of this bot"),
    ],
)
def test_a_claim_not_in_the_facts_removes_its_sentence(sentence: str, kind: str) -> None:
    got = check(f"gemma4-old is FAILED. {sentence}")
    assert got.text == "gemma4-old is FAILED."
    assert any(kind in r.why and r.why.endswith("is not in the facts") for r in got.removed), got.removed


@pytest.mark.parametrize(
    "text",
    [
        "Run `sudo curl -X DELETE http://10.0.0.2:8000/v1/models` to clear it.",
        "Try this:\n```bash\ndocker rm -f vllm && docker run --rm vllm/vllm-tpu:latest\n```",
        "You can sudo systemctl restart docker on the node.",
        "$ gcloud compute tpus queued-resources delete gemma4-old --zone europe-west4-a",
        "Use `kubectl delete pod vllm-0` to restart the server.",
        "Then pip install -U vllm and retry.",
    ],
)
def test_shell_commands_are_never_shown(text: str) -> None:
    got = check("gemma4-old is FAILED in europe-west4-a. " + text)
    assert got.text == "gemma4-old is FAILED in europe-west4-a."
    assert any(r.why.startswith("a shell command") for r in got.removed)
    assert "sudo" not in got.text and "docker rm" not in got.text


def test_a_quote_of_the_facts_is_kept_and_an_invented_one_removed() -> None:
    quote = "```\n`vllm` exited at 04:31 UTC (exit code 137), 3 restarts\n```"
    got = check(f"The container stopped:\n{quote}")
    assert got.text == f"The container stopped:\n{quote}", got.removed
    invented = check("The container stopped:\n```\nkilled by the OOM killer at 03:12\n```\nIt is down.")
    assert invented.text == "It is down."
    assert invented.removed[0].why == "a quoted block that is not in the facts"


def test_prose_about_docker_is_not_a_shell_command() -> None:
    text = "The docker logs show the vllm container exited with code 137."
    assert check(text).text == text


@pytest.mark.parametrize(
    "text",
    [
        "Run `/tpu describe gemma4-old` for its error.",
        "Use /tpu status to see every queued resource.",
        "Restart the server with:\n```\n/vllm restart\n```",
    ],
)
def test_the_bots_own_commands_are_kept_when_they_parse(text: str) -> None:
    got = check(text)
    assert got.text and not got.removed, got.removed


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("gemma4-old is FAILED.<end_of_turn>\n<start_of_turn>user\ndelete it", "gemma4-old is FAILED."),
        ("<start_of_turn>model\ngemma4-qr is ACTIVE in us-east5-a.", "gemma4-qr is ACTIVE in us-east5-a."),
        ("<|channel>thought\nlet me think<channel|>gemma4-qr is ACTIVE.<turn|>", "gemma4-qr is ACTIVE."),
        ("gemma4-qr is ACTIVE.<|im_end|>\n<|im_start|>user\nthanks", "gemma4-qr is ACTIVE."),
    ],
)
def test_template_tokens_end_the_answer(text: str, kept: str) -> None:
    got = check(text)
    assert got.text == kept
    assert got.removed[0].why.startswith("chat-template tokens")


def test_echoed_instructions_are_dropped_and_mostly_echo_is_withheld() -> None:
    echo = (
        "You are the assistant of a Slack ChatOps bot that runs Gemma on vLLM on Cloud TPU VMs. Answer the "
        "user's question briefly, using the read-only tools to look things up when useful."
    )
    got = check(echo + " gemma4-qr is ACTIVE in us-east5-a.")
    assert got.withheld.startswith("the model mostly repeated the bot's instructions")
    assert got.text == ""
    one = check("gemma4-qr is ACTIVE in us-east5-a. Its node is READY. " + echo.split(". ")[0] + ".")
    assert one.text == "gemma4-qr is ACTIVE in us-east5-a. Its node is READY."


def test_repeated_and_looping_text_is_dropped() -> None:
    loop = "the the cache the cache the cache the cache the cache the cache is full full full"
    got = check(f"gemma4-qr is ACTIVE. gemma4-qr is ACTIVE. It is in us-east5-a. {loop}.")
    assert got.text == "gemma4-qr is ACTIVE. It is in us-east5-a."
    assert [r.why for r in got.removed] == ["repeated text", "repeated text"]


def test_a_state_the_facts_deny_is_removed() -> None:
    got = check("gemma4-old is ACTIVE and serving. gemma4-qr is in us-east5-a.")
    assert got.text == "gemma4-qr is in us-east5-a."
    assert "gemma4-old is ACTIVE; it is FAILED" in got.removed[0].why


def test_a_name_that_resolves_to_nothing_is_not_repeated_as_a_subject() -> None:
    got = check("gemma4-olt is running fine. gemma4-old is FAILED.", unknown_names=["gemma4-olt"])
    assert got.text == "gemma4-old is FAILED."
    assert "`gemma4-olt` names nothing the bot knows" in got.removed[0].why


def test_percentages_times_and_counts_match_the_facts_as_written_elsewhere() -> None:
    text = "The KV cache is 81% used. The container exited at 4:31 UTC after 3 restarts, exit code 137."
    got = check(text)
    assert got.text == text, got.removed


def test_a_cut_answer_loses_its_unfinished_sentence_and_is_marked() -> None:
    got = check("gemma4-old is FAILED in europe-west4-a. The zone ran out of capa", cut=True)
    assert got.text == "gemma4-old is FAILED in europe-west4-a."
    assert got.cut and "token limit" in got.summary()


def test_an_answer_of_invented_claims_is_withheld_with_the_reason() -> None:
    got = check(
        "gemma4-old is in us-central2-b. It costs $4.20 per hour. It runs vLLM 0.6.3. Restart it.",
    )
    assert got.text == ""
    # the reason names the kind of claim, never the unchecked claim itself (it would be posted after all)
    assert "a zone not in the facts" in got.withheld and "us-central2-b" not in got.withheld
    assert "`us-central2-b` (a zone) is not in the facts" in {r.why for r in got.removed}  # for the log
    most = check("gemma4-old is in us-central2-b. It costs $4.20 per hour. It is FAILED in europe-west4-a.")
    assert most.withheld.startswith("most of it named things the facts do not hold")
    empty = check("   ")
    assert empty.withheld == "the model wrote nothing that could be checked"


def test_a_prompt_passed_through_keeps_its_words_but_never_a_shell_command() -> None:
    from bot.views.gemma import answer_blocks
    from llm.client import StreamResult

    text = "A TPU is a matrix accelerator. Reset it with `sudo reboot now`.<end_of_turn><start_of_turn>user"
    result = StreamResult(text, 0.1, 0.01, 50.0, 10, 20, 0.5, "stop")
    shown = str(answer_blocks(result, "gemma", PARSES))
    assert "A TPU is a matrix accelerator." in shown
    assert "sudo" not in shown and "start_of_turn" not in shown
    assert "unchecked: no facts were read" in shown and "removed: chat-template tokens" in shown


@pytest.mark.parametrize(
    "sentence",
    [
        "The Hugging Face token problem has resurfaced in recent days.",
        "Yes, the docker pull rate limit is still a problem.",
        "The TPU is currently failing with an OOM.",
    ],
)
def test_an_earlier_failure_told_as_current_is_removed(sentence: str) -> None:
    got = check(f"gemma4-qr is ACTIVE. {sentence}", only_earlier_failures=True)
    assert got.text == "gemma4-qr is ACTIVE."
    assert got.removed[0].why == "it tells an earlier failure as current; the facts say it is not"
    kept = check("The token problem is no longer happening; gemma4-qr is ACTIVE.", only_earlier_failures=True)
    assert kept.text == "The token problem is no longer happening; gemma4-qr is ACTIVE."
    assert check(f"gemma4-qr is ACTIVE. {sentence}").text.endswith(sentence)  # failures now: not checked
