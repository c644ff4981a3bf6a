"""Every bot command a fault family's fix names is a real command, with flags it accepts: a fix the reader
cannot run costs more than no fix (filled for a sample deployment, in every queued-resource state it
names, and filled with what the evidence of the diagnosis table's cases names: a zone, an accelerator
type, ... taken from a log line must leave the command whole)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import bot.handlers  # noqa: F401  (declares every command)
from bot.commands.registry import Command, registry
from ops.diagnosis.engine import diagnose
from ops.diagnosis.evidence import KINDS
from ops.diagnosis.families import FixFacts, catalogue, figures, fill
from tests.cases import case_text

_MENTION = re.compile(r"/(tpu|vllm|gemma|logs|alerts|fleet)((?: [a-z]+){1,2})")
# A command mention ends at punctuation or at the words that join two commands in a fix.
_END = re.compile(r"[,;()`]| or | then | and | for | with | to | once | if ")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def _fixes() -> list[tuple[str, str]]:
    out = []
    for family in catalogue().families:
        for state in (None, *family.fix_when):
            deployment = FixFacts(
                model="google/gemma-4-31B-it",
                accelerator_type="v6e-8",
                tensor_parallel_size=8,
                max_model_len=16384,
                zone="us-east5-a",
                name="gemma4-qr",
                state=state,
            )
            out.append((f"{family.name}[{state}]", fill(family.fix_for(state), figures({}, deployment))))
    return out + _evidence_fixes()


def _evidence_fixes() -> list[tuple[str, str]]:
    """The fixes of the diagnosis table's cases whose finding took a value from its line, in every
    queued-resource state the family has a fix for."""
    table = yaml.safe_load((Path(__file__).parents[1] / "fixtures" / "diagnose_cases.yaml").read_text())
    out = []
    for index, case in enumerate(table["cases"]):
        text = case_text(case["file"]) if "file" in case else str(case["text"])
        for finding in diagnose(text).findings[:1]:
            if not set(finding.values) & set(KINDS):
                continue
            family = catalogue()[finding.name]
            for state in (None, *family.fix_when):
                deployment = FixFacts(
                    zone="us-east5-a", name="gemma4-qr", accelerator_type="v6e-8", state=state
                )
                fix = fill(family.fix_for(state), figures(finding.values, deployment))
                out.append((f"case{index}:{family.name}[{state}]", fix))
    return out


def _command(group: str, words: str) -> Command | None:
    tokens = (group, *words.split())
    for length in (3, 2):
        found = [c for c in registry.commands() if c.words == tokens[:length]]
        if found:
            return found[0]
    return None


@pytest.mark.parametrize(("where", "fix"), _fixes(), ids=[w for w, _ in _fixes()])
def test_commands_named_in_fixes_exist_with_their_flags(where: str, fix: str) -> None:
    for match in _MENTION.finditer(fix):
        command = _command(match.group(1), match.group(2))
        assert command is not None, f"{where}: /{match.group(1)}{match.group(2)} is not a command: {fix}"
        rest = fix[match.end() :]
        segment = rest[: m.start()] if (m := _END.search(rest)) else rest
        accepted = {p.flag for p in command.params if p.flag}
        unknown = set(_FLAG.findall(segment)) - accepted
        assert not unknown, f"{where}: /{command.name} takes no {sorted(unknown)}: {fix}"
