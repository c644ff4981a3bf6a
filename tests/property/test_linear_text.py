"""Text the bot does not control (request bodies, Slack text, log lines, model answers, error messages) is
handled in time linear in its length.

Two guarantees, both deterministic (no clock, so a loaded machine cannot fail them):

1. Structure: every regular expression in `bot`, `ops` and `llm` is RE2 (`ops.linear`), which never
   backtracks; the few Python `re` patterns left (ours, and drain3's masks) are listed here with why they
   are safe. Read from the
   source (any `re.compile(...)`, `re.search(...)`...) and from the modules (any compiled pattern object).
2. Work per KB: the Python code around the patterns (value scans, line loops) is measured by the number of
   interpreter events it runs (`sys.settrace`), on adversarial texts of 1 KB and of 64 KB made of the same
   repeated piece (runs of spaces, repeated separators, nested quotes, many `=` and `:`, openers without
   closers). Linear work grows 64 times; the bound allows twice that, so quadratic work (4,096 times) fails.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bot
import bot.handlers
import llm
import ops
from bot.chat.asks import DIRECTIVES, find_instructions, patterns, read_ask
from bot.chat.subjects import Known, resolve
from bot.commands.registry import normalize, registry
from bot.slack.app import Refused, _check_shape
from bot.slack.render import escape, split_sections, to_mrkdwn
from llm import logsum
from llm.agent import inspect_message
from llm.grounding import contradictions
from llm.redact import redact
from ops.diagnosis import families as faults
from ops.gcp.cloudlogs import LogEntry
from ops.linear import is_linear

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("bot", "ops", "llm")
MATCHING = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}

# Python `re` left in the product, each with why it cannot backtrack badly or why it must stay `re`.
PYTHON_RE: dict[str, str] = {
    "bot/slack/listeners.py": (
        "Bolt matches a command name by `re.Pattern` only: `^/tpu$` (one word) and `^/` (one char)"
    ),
    "llm/client.py": (
        "the token estimate's pieces (`_PIECE`): single characters or at most four letters per alternative, "
        "each position tried once; the Unicode classes (`[^\\W\\d_]`) are spelled differently in RE2"
    ),
}
# Patterns a library compiles with Python `re` from strings we give it.
LIBRARY_PYTHON_RE: dict[str, str] = {
    "llm.logsum._MASKS": (
        "drain3 compiles its masking instructions itself; each is a run of one character class bounded by "
        "characters outside it (time stamps, numbers, paths, hex), with look-arounds of one character, so "
        "no position is tried twice by a nested quantifier"
    ),
}


def _product_files() -> list[Path]:
    return sorted(path for package in PRODUCT for path in (ROOT / package).rglob("*.py"))


def _python_re_calls(path: Path) -> list[str]:
    """`re.compile(...)`, `re.search(...)`... in `path`, as "path:line"."""
    tree = ast.parse(path.read_text(), str(path))
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "re"
        and node.func.attr in MATCHING
    ]


def test_every_pattern_in_the_product_is_re2_or_listed_with_its_reason() -> None:
    calls = [call for path in _product_files() for call in _python_re_calls(path)]
    unlisted = [call for call in calls if call.rsplit(":", 1)[0] not in PYTHON_RE]
    assert unlisted == [], "use ops.linear.linear (RE2) for these, or list them in PYTHON_RE with why"
    assert {call.rsplit(":", 1)[0] for call in calls} == set(PYTHON_RE), "a listed file no longer needs `re`"


def _modules() -> list[ModuleType]:
    found = []
    for package in (bot, ops, llm):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            found.append(importlib.import_module(info.name))
    return found


def _patterns(value: object, depth: int = 0) -> list[object]:
    """Compiled patterns in a module attribute, looking one level into lists, tuples and dicts."""
    if isinstance(value, re.Pattern) or is_linear(value):
        return [value]
    if depth < 2 and isinstance(value, list | tuple):
        return [p for item in value for p in _patterns(item, depth + 1)]
    if depth < 2 and isinstance(value, dict):
        return [p for item in value.values() for p in _patterns(item, depth + 1)]
    return []


def test_every_compiled_rule_is_re2() -> None:
    """What the source check cannot see: patterns built elsewhere and kept (detect-secrets' patterns in
    llm.redact, the fault catalogue's), as module attributes or in the catalogue."""
    python = []
    for module in _modules():
        path = module.__name__.replace(".", "/") + ".py"
        if path in PYTHON_RE:
            continue
        for name, value in vars(module).items():
            python += [f"{module.__name__}.{name}" for p in _patterns(value) if isinstance(p, re.Pattern)]
    assert python == []
    assert [type(m).__name__ for m in logsum._MASKS] == ["MaskingInstruction"] * len(logsum._MASKS)
    catalogue = faults.catalogue()
    assert all(is_linear(p) for family in catalogue.families for p in family.patterns)


def test_a_catalogue_pattern_that_needs_backtracking_is_refused(tmp_path: Path) -> None:
    team = tmp_path / "team.yaml"
    team.write_text("families:\n  - {name: x-y, patterns: ['(?<=a)b'], conclusion: c, fix: f}\n")
    with pytest.raises(ValueError, match="RE2"):
        faults.load_file(team)


# ---- work per KB ------------------------------------------------------------------------------------------


def _work(function: Callable[[str], object], text: str) -> int:
    """Interpreter events (calls, lines, returns) while `function(text)` runs: a count of the Python work,
    the same on any machine and under any load."""
    events = 0

    def count(frame: object, event: str, arg: object) -> Callable[..., object]:
        nonlocal events
        events += 1
        return count

    sys.settrace(count)
    try:
        function(text)
    finally:
        sys.settrace(None)
    return events


CATALOGUE = faults.catalogue()
KNOWN = Known({"gemma4-qr": ["gemma4-qr-node"], "gemma4-old": []}, "production", "gemma4-qr")
INSTRUCTIONS = patterns(registry)
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _summarize(text: str) -> object:
    lines = text.splitlines() or [text]
    return logsum.summarize(LogEntry(NOW, "ERROR", line) for line in lines)


def _gate_shape(text: str) -> object:
    try:
        return _check_shape({"CONTENT_TYPE": "application/json"}, text.encode())
    except Refused as refused:
        return refused.status


TEXT_HANDLERS: dict[str, Callable[[str], object]] = {
    "redact": redact,
    "fault catalogue": CATALOGUE.match,
    "key lines": faults.key_lines,
    "log templates (drain3)": _summarize,
    "model markup": inspect_message,
    "claims in an answer": lambda text: contradictions(text, {"gemma4-qr": "ACTIVE"}),
    "question subjects": lambda text: resolve(text, [], KNOWN),
    "asks in a question": read_ask,
    "instructions in data": lambda text: find_instructions(
        [("the logs", text, INSTRUCTIONS), ("a tool result", text, DIRECTIVES)]
    ),
    "Slack escaping": lambda text: to_mrkdwn(escape(text)),
    "Slack sections": split_sections,
    "typed command": normalize,
    "request body shape": _gate_shape,
}

# Pieces that make backtracking or re-scanning rules slow when repeated: runs of spaces and separators,
# nested and escaped quotes, assignments whose value never ends, openers without closers, look-alikes.
ADVERSARIAL = [
    " ",
    "\t \n",
    "=",
    ":",
    "=:",
    "password: x ",
    "password: $x ",
    "token=%token=",
    "'api_key': [$x ",
    '"\\"',
    '\\"password\\": \\"',
    "'\"",
    "--password -",
    "eyJa.b.",
    "http://a:b@",
    "x@",
    "AKIA",
    "hf_",
    "<|tool_call>",
    "&amp",
    "[REDACTED",
    "A.",
    "-----BEGIN PRIVATE KEY-----",
    'Error: x\n  File "a", line 1\n',
    "ForCausalLM_",
    "{",
    "[",
    '{"a":',
    "how much ",
    "<@U1|",
    "\u2014",
]
PIECES = st.one_of(
    st.sampled_from(ADVERSARIAL),
    st.tuples(st.sampled_from(ADVERSARIAL), st.sampled_from(ADVERSARIAL)).map("".join),
    st.text(min_size=1, max_size=6),
)


def _repeated(piece: str, size: int) -> str:
    return (piece * (size // len(piece) + 1))[:size]


# Derandomized: CI runs the same examples every time; few, as each traces 65 KB through every handler.
# Slow (seconds of CPU per example): `make test` runs it, and .ci/run on each interpreter (-m slow).
@pytest.mark.slow
@settings(max_examples=15, deadline=None, derandomize=True)
@given(PIECES)
def test_work_per_kb_does_not_grow_with_the_text(piece: str) -> None:
    small, large = _repeated(piece, 1024), _repeated(piece, 64 * 1024)
    for name, handler in TEXT_HANDLERS.items():
        per_kb_small = _work(handler, small)
        per_kb_large = _work(handler, large) / 64
        assert per_kb_large <= 2 * per_kb_small + 200, f"{name}: work per KB grows on {piece!r} repeated"


def test_the_issues_body_is_redacted_in_linear_time() -> None:
    """The reported body: a JSON request whose value is `password: x` and 60,000 spaces."""
    body = json.dumps({"text": "password: x" + " " * 60_000})
    small = json.dumps({"text": "password: x" + " " * 900})
    assert _work(redact, body) / 60 <= 2 * _work(redact, small) + 200
    assert "[REDACTED:password]" in redact(body)
