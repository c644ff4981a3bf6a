"""Every refusal's hint fits the state it is given in: each command's refusals are driven through the states
that trigger them (against the simulators, through the Runner), and every command a refusal suggests is run
next and must be accepted: it parses, names no placeholder, and is not refused in that same state (a change
shows its Confirm button or says there is nothing to do; a read answers)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from bot.commands.registry import UsageError
from sim.demo import Demo
from tests.handlers.conftest import Handlers

REFUSED = re.compile(r"^(?:\(updated\) )?:x: `([a-z ]+)`:", re.MULTILINE)
PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z_]*|\.\.\.|<[^>]*>|…)$")
GROUPS = ("tpu", "vllm", "gemma", "logs", "alerts", "fleet")


@dataclass(frozen=True)
class Case:
    """A command line refused in a state, the words its refusal must say, and how many commands it must
    suggest at least (0: a refusal whose way on is no command, e.g. a shorter duration)."""

    line: str
    says: str
    suggests: int = 1


# ---- states -------------------------------------------------------------------------------------------


def as_scenario(world: Demo) -> None:
    """The demo's default world: gemma4-qr ACTIVE (node READY, vLLM serving), gemma4-standby WAITING,
    gemma4-old FAILED."""


def old_suspended(world: Demo) -> None:
    qr = world.gcp.world.queued_resources[("europe-west4-a", "gemma4-old")]
    with world.gcp.world.lock:
        qr.state, qr.error_code, qr.error_message = "SUSPENDED", None, None


def primary_node_stopped(world: Demo) -> None:
    qr = world.gcp.world.queued_resources[("us-east5-a", "gemma4-qr")]
    with world.gcp.world.lock:
        qr.node.state = "STOPPED"


def container_stopped(world: Demo) -> None:
    code, _, err = world.host.docker.run("stop", [world.settings.vllm_container], {})
    assert code == 0, err


def vllm_loading(world: Demo) -> None:
    world.host.docker.config["boot_s"] = 600
    code, _, err = world.host.docker.run("restart", [world.settings.vllm_container], {})
    assert code == 0, err


def every_zone_refused_flex_start(world: Demo) -> None:
    store = world.bot.services.store
    for zone in world.settings.tpu_zones:
        store.remember_zone_failure(
            zone, "v6e-8", "flex-start", "flex-start not offered: test", now=datetime.now(UTC)
        )


STATES: dict[str, tuple[Callable[[Demo], None], list[Case]]] = {
    "as the scenario": (
        as_scenario,
        [
            Case("tpu describe nosuch", "not found", 1),
            Case("tpu describe gemma4-q", "did you mean `/tpu describe gemma4-qr`?", 1),
            Case("tpu delete gemma4-ol", "did you mean `/tpu delete gemma4-old`?", 1),
            Case("tpu describe gemma4-qr --zone europe-west4-a", "not found", 1),
            Case("tpu delete nosuch", "not found", 1),
            Case("tpu delete gemma4-qr", "has running nodes", 1),
            Case("tpu delete gemma4-old --created 2020-01-01T00:00:00Z", "deleted and recreated", 1),
            Case("tpu reset gemma4-standby", "has no VM yet", 1),
            Case("tpu reset gemma4-qr", "only a FAILED queued resource can be reset", 3),
            Case("tpu stop gemma4-qr", "no node gemma4-qr", 1),
            Case("tpu start gemma4-standby", "no node gemma4-standby", 0),
            Case("tpu stop nosuch", "no node nosuch", 0),
            Case("tpu create gemma4-qr --zone us-east5-a --allow-second", "already exists", 1),
            Case("tpu create gemma4-b --zone us-east5-a", "already ACTIVE", 1),
            Case("tpu create gemma4-b --zone mars-east1-a --allow-second", "unknown zone", 1),
            Case("tpu create gemma4-b --zone europe-west4-a --type v6e-4 --allow-second", "not offered", 1),
            Case("tpu create gemma4-b --spot --max-run 2h", "applies to --flex-start only", 0),
            Case("tpu find gemma4-b", "already ACTIVE", 2),
            Case("tpu find --type v5p-8 --allow-second", "no zone of project", 1),
            Case("tpu recover gemma4-qr", "nothing to recover", 1),
            Case("tpu recover nosuch", "not found", 1),
            Case("vllm metrics --chart 30d", "history is kept for", 0),
            Case("vllm bench compare 1 2", "no stored benchmark run", 1),
            Case("alerts mute nosuch 1h", "no alert subject", 0),
            Case("alerts mute vllm 30d", "cannot mute for", 0),
            Case("gemma rate 0123456789abcdef01234567 helpful", "no answer", 0),
            Case("""logs --filter 'jsonPayload.message=~"(a"'""", "invalid regular expression", 0),
        ],
    ),
    "gemma4-old SUSPENDED": (old_suspended, [Case("tpu reset gemma4-old", "cannot be reset", 1)]),
    "the primary's node STOPPED": (
        primary_node_stopped,
        [Case("tpu reset gemma4-qr", "only a FAILED queued resource can be reset", 1)],
    ),
    "the vLLM container stopped": (
        container_stopped,
        [
            Case("vllm bench --prompts 4", "vLLM is not running", 2),
            Case("vllm sweep --concurrency 1,8 --input-len 128", "vLLM is not running", 2),
            Case("vllm models", "vLLM is not running", 2),
            Case("vllm info", "vLLM is not running", 2),
            Case("vllm metrics", "vLLM is not running", 2),
            Case("gemma ask hello", "vLLM is not running", 2),
            Case("gemma stats hello", "vLLM is not running", 2),
        ],
    ),
    "vLLM loading": (vllm_loading, [Case("vllm bench --prompts 4", "vLLM is starting", 1)]),
    "every zone refused flex-start": (
        every_zone_refused_flex_start,
        [Case("tpu find gemma4-b --allow-second", "remembered as not offering flex-start", 1)],
    ),
}

# Commands whose only refusals are about their arguments (usage errors, checked by the parser) or about
# the bot's own settings, each with why; every other command must have a case above.
WITHOUT_STATE_REFUSAL = {
    "help": "answers every topic",
    "tpu list": "lists what there is, an unreadable zone as a red line",
    "tpu status": "shows each failing source as a red line",
    "fleet": "shows each failing deployment as a red line",
    "tpu ensure": "a no-op is an answer (test_a_no_op_ensure_is_an_answer)",
    "tpu zones": "reports each zone, unreadable ones in red",
    "tpu cost": "every type and region gets a labelled figure",
    "tpu config": "renders the settings",
    "tpu audit": "reads the trail",
    "tpu token": "opens the form",
    "vllm health": "reports /health and the probe, whatever they say",
    "vllm endpoint": "says how the endpoint was found, or that none is ACTIVE (the resolver's own hint)",
    "vllm status": "reports the container's state",
    "vllm logs": "reads the log",
    "vllm syslog": "reads the journal",
    "vllm start": "previews in any container state",
    "vllm stop": "previews in any container state",
    "vllm restart": "previews in any container state",
    "vllm rm": "previews in any container state",
    "vllm bench list": "lists the stored runs",
    "gemma feedback": "lists the rated answers",
    "gemma chat": "answers with the facts it has",
    "logs analyze": "answers with what it read, labelled partial",
    "alerts list": "lists the open alerts",
    "alerts unmute": "says when a subject was not muted",
    "alerts test": "posts the test alert, or says why not (settings, Slack's refusal)",
}


def test_every_command_has_its_refusals_covered_or_says_why_not(demo: Demo) -> None:
    covered = {
        demo.bot.registry.parse(case.line).command.name for _, cases in STATES.values() for case in cases
    }
    names = {c.name for c in demo.bot.registry.commands()}
    assert names - covered - set(WITHOUT_STATE_REFUSAL) == set()
    assert covered & set(WITHOUT_STATE_REFUSAL) == set()


def suggestions(world: Demo, refusal: str) -> list[str]:
    """The commands a refusal names: each backticked `/command ...` whole, and each bare /command with the
    longest run of words after it that parses (a hint's prose around it is not part of it)."""
    found = [m for m in re.findall(r"`(/[^`]+)`", refusal) if m.split()[0].lstrip("/") in GROUPS]
    bare = re.sub(r"`[^`]*`", " ", refusal)
    start = r"(?<![\w/])/(?:" + "|".join(GROUPS) + r")\b"
    for match in re.finditer(start + r"(?:(?!\s" + start + r")[^\n_])*", bare):  # up to the next command
        words = match.group(0).split()
        for end in range(len(words), 0, -1):
            candidate = " ".join(w.rstrip(",;:.)") for w in words[:end])
            try:
                world.bot.registry.parse(candidate)
            except UsageError:
                continue
            found.append(candidate)
            break
    return found


def accepted(world: Demo, line: str, answer: str) -> bool:
    command = world.bot.registry.parse(line).command
    if REFUSED.search(answer):
        return False
    return "[Confirm" in answer or "Nothing to do" in answer if command.changes_infra else bool(answer)


@pytest.mark.parametrize("state", list(STATES))
def test_each_refusal_suggests_what_is_accepted_in_that_state(world: Demo, state: str) -> None:
    setup, cases = STATES[state]
    setup(world)
    handlers = Handlers(world)
    for case in cases:
        refusal = handlers.run(case.line)
        assert REFUSED.search(refusal), (state, case.line, refusal)
        assert case.says in refusal, (state, case.line, refusal)
        suggested = suggestions(world, refusal)
        assert len(suggested) >= case.suggests, (state, case.line, refusal, suggested)
        for line in suggested:
            words = line.split()
            assert not [w for w in words if PLACEHOLDER.match(w)], (case.line, line)
            if f"then `{line}`" in refusal:
                # The second step of a sequence ("`/tpu stop X`, then `/tpu start X`") is accepted once the
                # step before it ran, not in the state the refusal was given in.
                continue
            answer = handlers.run(line.lstrip("/"))
            assert accepted(world, line.lstrip("/"), answer), (state, case.line, line, answer)


def test_a_no_op_ensure_is_an_answer_not_a_refusal(world: Demo) -> None:
    with world.gcp.world.lock:
        del world.gcp.world.queued_resources[("europe-west4-a", "gemma4-old")]
    answer = Handlers(world).run("tpu ensure")
    assert ":white_check_mark: Nothing to do: `gemma4-qr` is live" in answer
    assert "[Confirm" not in answer and not REFUSED.search(answer)
