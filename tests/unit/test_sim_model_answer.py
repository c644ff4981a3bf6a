"""The simulated model's answer after a tool result: one short sentence of its facts, marked as simulated,
never a dump of the result or a line cut in the middle."""

from __future__ import annotations

from sim.vllm.model import CANNED_TEXT, SIMULATED_ANSWER, tool_result_answer

STATUS = """[status of deployment `production`]
TPU / vLLM status

*gemma4-qr* (primary) · `us-east5-a` · :large_green_circle: ACTIVE (by USER)
v6e-8 · flex-start · created 1h 30m ago"""


def test_the_first_fact_line_becomes_one_sentence_naming_its_source() -> None:
    assert tool_result_answer(STATUS) == (
        SIMULATED_ANSWER + " Read from the status of deployment `production`: "
        "gemma4-qr (primary) · `us-east5-a` · ACTIVE (by USER)."
    )


def test_a_long_query_is_named_not_quoted_and_the_rest_is_never_dumped() -> None:
    query = '(resource.type="tpu_worker" OR logName="projects/demo-project/logs/gcplogs-docker-driver")'
    result = (
        f"[logs of node `gemma4-old-node`: what the question is about]\nNo log entries match `{query}`.\n"
    )
    answer = tool_result_answer(result + "more\n" * 50)
    assert (
        answer
        == SIMULATED_ANSWER + " Read from the logs of node `gemma4-old-node`: No log entries match the query."
    )


def test_a_fact_too_long_for_a_sentence_is_cut_at_its_first_clause() -> None:
    line = "*v6e-8* flex-start in us-east5, 1 h: *at most $21.60* [1]; " + "the catalogue row was used " * 10
    answer = tool_result_answer("[cost of deployment `production`]\n" + line)
    assert answer.endswith(
        "Read from the cost of deployment `production`: v6e-8 flex-start in us-east5, 1 h: at most $21.60."
    )


def test_every_answer_is_marked_in_one_form() -> None:
    assert CANNED_TEXT.startswith(SIMULATED_ANSWER)
    assert tool_result_answer("").startswith(SIMULATED_ANSWER)
