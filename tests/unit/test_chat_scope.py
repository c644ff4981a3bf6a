"""What a chat question points at (`bot.chat.subjects`: `scope_of`, `aim_of`, `plan_call`): its subjects as
names stand for them, where vLLM, the container and the logs are read, and what a tool called without a
subject reads."""

from __future__ import annotations

import pytest

import bot.handlers  # noqa: F401  (declares every command on the registry)
from bot.chat.subjects import Aim, Known, Subjects, aim_of, plan_call, resolve, scope_of
from bot.commands.registry import registry
from llm.claims import check_answer
from llm.grounding import Evidence
from ops.tpu.model import Absent

KNOWN = Known(
    {"gemma4-qr": ["gemma4-qr-node"], "gemma4-old": ["gemma4-old-node"], "gemma4-standby": []},
    "production",
    "gemma4-qr",
    {"staging": {"gemma4-staging": ["gemma4-staging-node"]}},
)
PRIMARIES = {"production": "gemma4-qr", "staging": "gemma4-staging"}


def _asked(question: str) -> tuple[Subjects, Aim]:
    subjects = resolve(question, [], KNOWN)
    return subjects, aim_of(KNOWN, subjects, PRIMARIES)


def test_names_stand_for_their_subjects() -> None:
    scope = scope_of(KNOWN, resolve("why did gemma4-old fail?", [], KNOWN))
    assert scope.asked == {"gemma4-old"}
    assert scope.named("logs of gemma4-qr-node") == {"gemma4-qr"}
    assert scope.named("staging's vLLM") == {"staging", "gemma4-staging"}
    assert scope.label({"staging", "gemma4-staging", "gemma4-old"}) == "`gemma4-old`, `staging`"


def test_a_question_naming_nothing_is_about_the_channels_whole_deployment() -> None:
    scope = scope_of(KNOWN, resolve("any errors in the logs?", [], KNOWN))
    assert scope.asked == {"production", "gemma4-qr", "gemma4-old", "gemma4-standby"}


def test_a_deployment_named_alone_points_at_its_primary_in_its_own_deployment() -> None:
    subjects, aim = _asked("why is staging's vLLM slow?")
    assert aim == Aim(
        "staging", ("gemma4-staging",), ("gemma4-staging-node",), "gemma4-staging", ("gemma4-staging",)
    )
    assert scope_of(KNOWN, subjects).asked == {"staging", "gemma4-staging"}
    assert _asked("what about gemma4-staging-node?")[1].deployment == "staging"


def test_the_logs_tool_reads_the_subjects_nodes_one_by_one() -> None:
    subjects, aim = _asked("why did gemma4-old fail?")
    plan = plan_call("logs", ["node"], {"since": "2h"}, known=KNOWN, scope=scope_of(KNOWN, subjects), aim=aim)
    assert [(dict(r.arguments), r.deployment) for r in plan.reads] == [
        ({"since": "2h", "node": "gemma4-old-node"}, "production")
    ]
    assert plan.reads[0].header == "[logs of node `gemma4-old-node`: what the question is about]"
    assert plan.about == ("gemma4-old",)


def test_a_subject_without_a_node_gets_its_own_state_not_other_nodes_logs() -> None:
    subjects, aim = _asked("why is gemma4-standby stuck?")
    plan = plan_call("logs", ["node"], {}, known=KNOWN, scope=scope_of(KNOWN, subjects), aim=aim)
    [read] = plan.reads
    assert read.tool == "describe" and dict(read.arguments) == {"name": "gemma4-standby"}
    assert read.header.startswith(
        "[describe of `gemma4-standby` in place of logs: `gemma4-standby` has no TPU"
    )
    assert plan.about == ("gemma4-standby",) and not plan.logged


NEVER_CREATED = Known(
    {"gemma4-qr": ["gemma4-qr-node"], "gemma4-old": ["gemma4-old-node"], "gemma4-spot": ["gemma4-spot-node"]},
    "production",
    "gemma4-qr",
    absent={
        "gemma4-old-node": Absent("gemma4-old-node", "gemma4-old", "FAILED"),
        "gemma4-spot-node": Absent("gemma4-spot-node", "gemma4-spot", "SUSPENDED"),
    },
)


def test_a_node_never_created_has_no_logs_its_queued_resources_state_is_read() -> None:
    """gemma4-old FAILED by a stockout names gemma4-old-node, which the TPU API never listed: the logs tool,
    called without a node or with that node, reads gemma4-old's own state and error, and says why in
    words; a node that existed and was deleted (a preempted spot) is read, said to be gone."""
    subjects = resolve("why did gemma4-old fail?", [], NEVER_CREATED)
    aim = aim_of(NEVER_CREATED, subjects, {"production": "gemma4-qr"})
    assert aim.nodes == () and [a.node for a in aim.unborn] == ["gemma4-old-node"]
    scope = scope_of(NEVER_CREATED, subjects)
    for arguments in ({}, {"node": "gemma4-old-node"}):
        plan = plan_call("logs", ["node"], arguments, known=NEVER_CREATED, scope=scope, aim=aim)
        [read] = plan.reads
        assert read.tool == "describe" and dict(read.arguments) == {"name": "gemma4-old"}
        assert (
            "node `gemma4-old-node` of `gemma4-old` was never created (`gemma4-old` is FAILED" in read.header
        )
        assert "a node that never existed has no logs" in read.header and not plan.logged
    spot = resolve("why did gemma4-spot fail?", [], NEVER_CREATED)
    aim = aim_of(NEVER_CREATED, spot, {"production": "gemma4-qr"})
    plan = plan_call("logs", ["node"], {}, known=NEVER_CREATED, scope=scope_of(NEVER_CREATED, spot), aim=aim)
    [read] = plan.reads
    assert read.tool == "" and dict(read.arguments) == {"node": "gemma4-spot-node"} and plan.logged
    assert read.header.endswith("its entries are from before it was deleted]")


def test_another_subject_asked_for_by_name_is_read_in_its_deployment_and_labelled() -> None:
    subjects, aim = _asked("why did gemma4-old fail?")
    scope = scope_of(KNOWN, subjects)
    other = plan_call("logs", ["node"], {"node": "gemma4-staging-node"}, known=KNOWN, scope=scope, aim=aim)
    assert [r.deployment for r in other.reads] == ["staging"] and other.about == ("gemma4-staging",)
    assert other.reads[0].header.endswith("asked for by name: not what the question is about]")
    own = plan_call("describe", ["name"], {"name": "gemma4-old"}, known=KNOWN, scope=scope, aim=aim)
    assert own.reads[0].header == "[describe of `gemma4-old`]" and own.about == ("gemma4-old",)


def test_describe_without_a_name_describes_the_subject() -> None:
    subjects, aim = _asked("what broke on gemma4-old")
    plan = plan_call("describe", ["name"], {}, known=KNOWN, scope=scope_of(KNOWN, subjects), aim=aim)
    assert dict(plan.reads[0].arguments) == {"name": "gemma4-old"} and plan.about == ("gemma4-old",)


def test_tools_without_a_subject_read_the_deployment_pointed_at() -> None:
    subjects, aim = _asked("why is staging's vLLM slow?")
    scope = scope_of(KNOWN, subjects)
    metrics = plan_call("metrics", [], {}, known=KNOWN, scope=scope, aim=aim, serving=True)
    assert metrics.reads[0].deployment == "staging" and metrics.about == ("gemma4-staging",)
    assert metrics.reads[0].header == "[metrics of deployment `staging`, vLLM on `gemma4-staging`]"
    status = plan_call("status", [], {}, known=KNOWN, scope=scope, aim=aim)
    assert status.about == ("staging",) and status.reads[0].header == "[status of deployment `staging`]"


def test_each_resource_of_a_question_naming_several_is_read_on_its_own() -> None:
    """'why did gemma4-qr and gemma4-standby fail?': each one's logs are a fact about it alone, its nodes
    only (gemma4-standby has none: said so, never gemma4-qr-node's)."""
    for question in ("why did gemma4-qr and gemma4-standby fail?", "errors of gemma4-standby, gemma4-qr?"):
        parts = _asked(question)[1].each()
        by_resource = {part.resources: part.nodes for part in parts}
        assert by_resource == {("gemma4-qr",): ("gemma4-qr-node",), ("gemma4-standby",): ()}
    one = _asked("why did gemma4-old fail?")[1]
    assert one.each() == (one,)
    deployment = _asked("any errors in the logs?")[1]
    assert deployment.each() == (deployment,)


def test_a_name_typed_with_look_alikes_resolves() -> None:
    for question in (
        "why did gemma4\u2011old fail?",
        "why did gemma4-\u043eld fail?",
        "why did Gemma4-Old's fail?",
    ):
        subjects = resolve(question, [], KNOWN)
        assert subjects.resources == ("gemma4-old",) and not subjects.read_as and not subjects.unresolved


SAME_NAME = Known(
    {"gemma4-qr": ["gemma4-qr-node"], "staging": []},
    "production",
    "gemma4-qr",
    {"staging": {"gemma4-staging": ["gemma4-staging-node"]}},
)
STAGING_ELSEWHERE = Evidence(
    "[describe of `gemma4-staging`, asked for by name: not what the question is about]\n"
    "`gemma4-staging`: ACTIVE in `us-east5-b`; TTFT p95 2,310 ms; 14 requests waiting",
    frozenset({"gemma4-staging"}),
)


@pytest.mark.parametrize(
    "answer",
    [
        "staging failed: TTFT p95 was 2,310 ms with 14 requests waiting in us-east5-b.",
        "The staging queued resource is in us-east5-b.",
        "staging's TTFT p95 is 2,310 ms.",
    ],
)
def test_a_resource_named_like_another_deployment_does_not_take_its_facts(answer: str) -> None:
    subjects = resolve("why did staging fail?", [], SAME_NAME)
    assert subjects.resources == ("staging",)  # production's queued resource `staging`
    scope = scope_of(SAME_NAME, subjects)
    assert scope.named("staging") == {"staging"} and scope.asked == {"staging"}
    evidence = [
        Evidence(
            "describe staging\n`staging`: *FAILED* in zone `europe-west4-a`, v6e-8 spot",
            frozenset({"staging"}),
        ),
        STAGING_ELSEWHERE,
        Evidence("why did staging fail?"),
    ]
    got = check_answer(answer, evidence, parses=registry.starts_with_command, scope=scope)
    assert got.text == "", got.summary()


def test_the_deployment_of_that_name_is_still_its_own_subject() -> None:
    subjects = resolve("how is gemma4-staging?", [], SAME_NAME)
    scope = scope_of(SAME_NAME, subjects)
    assert scope.named("gemma4-staging-node") == {"gemma4-staging"}
    assert "gemma4-staging" in scope.expand(["staging deployment"])  # the deployment, by its own key
    assert scope.named("staging") == {"staging"}  # the word reads as the resource, as `resolve` reads it
