"""Every fix that names a bot command works in the state it is given for (issue "One diagnosis engine",
point 4): the cases come from the catalogue (each family and queued-resource state whose filled fix names
a `/tpu`, `/vllm`, ... command), each puts a demo world in that state, shows the finding where on-call
reads it, and runs every command the fix names there: it must parse, name no placeholder, and be accepted
in that state (a change shows its Confirm button or says there is nothing to do; a read answers), as
tests/handlers/test_hints.py checks for refusals. A family whose fix gains a command fails the coverage
check until it has a world here or is listed in NOT_YET_IN_A_WORLD.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from ops.diagnosis.engine import ResourceState, diagnose
from ops.diagnosis.families import FixFacts, catalogue, figures, fill
from sim.demo import Demo
from tests.cases import case_text
from tests.handlers.conftest import Handlers
from tests.handlers.test_hints import (
    PLACEHOLDER,
    REFUSED,
    accepted,
    old_suspended,
    suggestions,
)

_COMMAND = re.compile(r"(?<![\w/])/(?:tpu|vllm|gemma|logs|alerts|fleet) [a-z]+")


def command_fixes() -> list[tuple[str, str | None]]:
    """(family, queued-resource state or None for the general fix) of every catalogue fix that names a bot
    command, filled for a sample deployment."""
    out = []
    for family in catalogue().families:
        for state in (None, *family.fix_when):
            sample = FixFacts(name="gemma4-qr", zone="us-east5-a", accelerator_type="v6e-8", state=state)
            if _COMMAND.search(fill(family.fix_for(state), figures({}, sample))):
                out.append((family.name, state))
    return out


# ---- worlds -----------------------------------------------------------------------------------------------


def primary_node_gone(world: Demo) -> None:
    """gemma4-qr stays ACTIVE, its node is deleted behind its back."""
    qr = world.gcp.world.queued_resources[("us-east5-a", "gemma4-qr")]
    with world.gcp.world.lock:
        qr.node.gone = True


def _say(world: Demo, line: str, timeout: float = 90) -> str:
    out, answered = world.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


def container_failing_with(case: str) -> Callable[[Demo], None]:
    """The vLLM container recreated so that it fails with the real log `case` (sim/cases) alone: removed,
    then started (a restart would bring the old container back when the new one fails)."""

    def setup(world: Demo) -> None:
        world.host.set_run_failing_log(case)
        for verb in ("rm", "start"):
            _say(world, f"/vllm {verb}")
            _say(world, "click Confirm")

    return setup


def as_scenario(world: Demo) -> None:
    """The default world: gemma4-old FAILED on a stockout in europe-west4-a."""


def _case_texts() -> dict[str, list[str]]:
    """family -> the texts of its cases in tests/fixtures/diagnose_cases.yaml (a handed file's text or the
    case's own), in file order."""
    table = yaml.safe_load((Path(__file__).parents[1] / "fixtures" / "diagnose_cases.yaml").read_text())
    out: dict[str, list[str]] = {}
    for case in table["cases"]:
        text = case_text(case["file"]) if "file" in case else case.get("text")
        if case.get("family") and text:
            out.setdefault(case["family"], []).append(str(text))
    return out


def old_failed_deciding(family: str) -> Callable[[Demo], None]:
    """gemma4-old FAILED with the first case text of `family` whose resource state the catalogue reads as
    that family: the TPU API's `failedData.error` of a create that failed so."""
    deployment = FixFacts(name="gemma4-old", state="FAILED")
    for case in _case_texts().get(family, []):
        # A case naming the primary's node is gemma4-old's own error here: a node another listed resource
        # owns would point the fix at that resource (FixFacts.about).
        text = case.replace("gemma4-qr-node", "gemma4-old-node")
        state = ResourceState("gemma4-old", "FAILED", " ".join(text.split()))
        found = diagnose(state, deployment).findings
        if found and found[0].name == family:
            error = state.error
            break
    else:
        raise AssertionError(f"no case of {family} is read as {family} in a FAILED resource's error")

    def setup(world: Demo) -> None:
        qr = world.gcp.world.queued_resources[("europe-west4-a", "gemma4-old")]
        with world.gcp.world.lock:
            qr.state, qr.error_code, qr.error_message = "FAILED", 9, error

    return setup


@dataclass(frozen=True)
class World:
    """How to reach a family's state, and the command that shows its finding there."""

    setup: Callable[[Demo], None]
    shows: str


WORLDS: dict[tuple[str, str | None], World] = {
    ("tpu-node-gone", "ACTIVE"): World(primary_node_gone, "tpu describe gemma4-qr"),
    ("tpu-stockout", "FAILED"): World(as_scenario, "tpu describe gemma4-old"),
    ("tpu-suspended", None): World(old_suspended, "tpu describe gemma4-old"),
    ("hf-gated-repo-401", None): World(container_failing_with("vllm-hf-gated-repo-401.log"), "vllm status"),
    ("hf-gated-repo-403", None): World(
        container_failing_with("hf-gated-repo-403-not-authorized.log"), "vllm status"
    ),
    ("disk-full", None): World(container_failing_with("docker-no-space-left.log"), "vllm status"),
    ("tpu-device-busy", None): World(container_failing_with("vllm-tpu-device-busy.log"), "vllm status"),
}
# A FAILED resource's fix, for every family that has one: gemma4-old failed with that family's error.
WORLDS |= {
    (family, "FAILED"): World(old_failed_deciding(family), "tpu describe gemma4-old")
    for family, state in command_fixes()
    if state == "FAILED" and (family, state) not in WORLDS
}

# Families whose command fix has no world here yet: not checked in their state. Each one added to WORLDS
# leaves this list; a new command fix must go to one of the two (test_every_command_fix_has_a_world).
NOT_YET_IN_A_WORLD = sorted(set(command_fixes()) - set(WORLDS), key=lambda case: (case[0], case[1] or ""))


def test_every_command_fix_has_a_world_or_is_listed() -> None:
    cases = set(command_fixes())
    assert set(WORLDS) <= cases, f"worlds for fixes that name no command: {set(WORLDS) - cases}"
    assert cases == set(WORLDS) | set(NOT_YET_IN_A_WORLD)


def _fix_of(answer: str, family: str) -> str:
    """The `_Fix:_` line of `family`'s finding in a rendered diagnosis."""
    found = re.search(r"\*" + re.escape(family) + r"\*: .*\n\s*_Fix:_ (.*)", answer)
    assert found is not None, f"{family} not shown:\n{answer}"
    return found.group(1)


@pytest.mark.parametrize(("family", "state"), list(WORLDS), ids=[f"{f}[{s}]" for f, s in WORLDS])
def test_each_command_a_fix_names_is_accepted_in_its_state(
    world: Demo, family: str, state: str | None
) -> None:
    chosen = WORLDS[(family, state)]
    chosen.setup(world)
    handlers = Handlers(world)
    fix = _fix_of(handlers.run(chosen.shows), family)
    lines = suggestions(world, fix)
    assert lines, f"{family}[{state}]: the fix names no command that parses: {fix}"
    for line in lines:
        assert not [w for w in line.split() if PLACEHOLDER.match(w)], (family, line)
        answer = handlers.run(line.lstrip("/"))
        assert not REFUSED.search(answer), (family, state, line, answer)
        assert accepted(world, line.lstrip("/"), answer), (family, state, line, answer)


def test_a_node_gone_under_an_active_resource_is_recreated_by_its_fix(world: Demo) -> None:
    """The known bad case: "/tpu reset or /tpu ensure" for a node gone under an ACTIVE resource (reset
    refuses an ACTIVE one, ensure leaves it alone). Its fix, followed to the end, recreates it."""
    primary_node_gone(world)
    fix = _fix_of(Handlers(world).run("tpu describe gemma4-qr"), "tpu-node-gone")
    assert "/tpu reset" not in fix and "/tpu delete gemma4-qr --force" in fix, fix
    _say(world, "/tpu delete gemma4-qr --force")
    _say(world, "click Confirm")
    resources = world.gcp.world.queued_resources
    with world.gcp.world.lock:
        assert ("us-east5-a", "gemma4-qr") not in resources or resources[
            ("us-east5-a", "gemma4-qr")
        ].state == "DELETING"
    ensure = _say(world, "/tpu ensure")
    assert "[Confirm" in ensure and "gemma4-qr" in ensure, ensure
