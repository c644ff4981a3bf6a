"""Every failure wording lives in the fault catalogue (ops/diagnosis/faults.yaml): a test fails when product
code (bot/, ops/, llm/; not the catalogue's loaders ops/diagnosis/families.py and ops/diagnosis/wordings.py)
matches on one itself (issue "One diagnosis engine").

A wording is a phrase the catalogue matches on (the literal runs of its families' and wordings' regexes) or
one of `UPSTREAM`, texts of the upstream services' failures. Product code "matches on" a string when it is
a regex (an argument of `linear`, `re.compile`, `re.search`...), a side of `in`, `==` or `!=`, or the
argument of a string method that looks for text (`startswith`, `find`, ...); a regex of the code also fails
when it matches one of `UPSTREAM`. Strings the bot only writes (messages, docstrings) are not matching and
are not checked. `ALLOWED` lists the few matches that are not failure wordings, each with its reason.
"""

from __future__ import annotations

import ast
import re
import re._parser as sre_parse  # the stdlib's regex parser: literal runs of the catalogue's patterns
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.diagnosis.families import BUILTIN_PATH, catalogue, load_file
from ops.diagnosis.wordings import load_wordings, wordings

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("bot", "ops", "llm")
LOADER = {"ops/diagnosis/families.py", "ops/diagnosis/wordings.py"}  # the catalogue's loaders

UPSTREAM = (
    # vLLM, tpu-inference, XLA, JAX, Python
    "RESOURCE_EXHAUSTED",
    "out of memory",
    "Traceback (most recent call last)",
    "EngineDeadError",
    "EngineCore encountered",
    "KV cache is needed",
    "maximum context length",
    "max_num_batched_tokens",
    "Address already in use",
    "Device or resource busy",
    # docker and registries
    "No space left on device",
    "manifest unknown",
    "pull access denied",
    "toomanyrequests",
    "Error response from daemon",
    "no such container",
    "no such image",
    "no such object",
    "already in use by container",
    "i/o timeout",
    "no such host",
    "Connection refused",
    "permission denied",
    # Hugging Face
    "401 Client Error",
    "403 Client Error",
    "gated repo",
    "Repository Not Found",
    # Google APIs (texts, not google.rpc.Code names: see ALLOWED)
    "DEADLINE_EXCEEDED",
    "PERMISSION_DENIED",
    "There is no more capacity",
    "internal error",
    "backend error",
    "service unavailable",
    # SSH and sudo
    "Host key verification failed",
    "Authentication failed",
    "a password is required",
)

# (file, string, why it is not a failure wording)
ALLOWED = {
    (
        "ops/tpu/capacity.py",
        "quota exceeded",
    ): "the catalogue's own `create.reason` label of a classification",
    ("ops/gcp/google.py", "quota exceeded"): "the catalogue's own `create.reason` label of a classification",
    ("bot/startup.py", "invalid_auth"): "a Slack Web API `error` field value the start-up check branches on",
}

_REGEX_CALLS = {"linear", "compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn"}
_TEXT_METHODS = {"startswith", "endswith", "find", "rfind", "index", "rindex", "count", "removesuffix"}


def _strings(node: ast.AST) -> Iterator[ast.Constant]:
    """The string constants an expression is built from (concatenations, f-strings, tuples, sets)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node
    elif isinstance(node, ast.JoinedStr):
        for value in node.values:
            yield from _strings(value)
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for element in node.elts:
            yield from _strings(element)
    elif isinstance(node, ast.BinOp):
        yield from _strings(node.left)
        yield from _strings(node.right)


def matched_strings(source: str) -> Iterator[tuple[str, int, str]]:
    """(how, line, string) of every string the source matches text with: "regex" (an argument of a regex
    function), "compare" (a side of in / == / !=), "method" (the argument of a text search method)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and _call_kind(node):
            for constant in _strings(node.args[0]):
                yield _call_kind(node), constant.lineno, constant.value
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.In, ast.NotIn, ast.Eq, ast.NotEq)) for op in node.ops
        ):
            for side in (node.left, *node.comparators):
                for constant in _strings(side):
                    yield "compare", constant.lineno, constant.value


def _call_kind(call: ast.Call) -> str:
    """ "regex" for `linear(p)`, `re.compile(p)`, `re.search(p, ...)`... (not `compiled.search(text)`, whose
    argument is the text), "method" for `text.startswith(s)`, `text.find(s)`..., else ""."""
    func = call.func
    if isinstance(func, ast.Name):
        return "regex" if func.id in _REGEX_CALLS else ""
    if isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id == "re" and func.attr in _REGEX_CALLS:
            return "regex"
        return "method" if func.attr in _TEXT_METHODS else ""
    return ""


def _runs(pattern: str) -> list[str]:
    """The literal runs of a regex: "Quota '(?P<q>\\w+)' exceeded" -> ["Quota '", "' exceeded"]."""
    out: list[str] = []

    def walk(items: sre_parse.SubPattern | list[tuple[object, object]]) -> None:
        current: list[str] = []
        for op, arg in items:
            if op is sre_parse.LITERAL:
                current.append(chr(arg))  # type: ignore[arg-type]
                continue
            if current:
                out.append("".join(current))
                current = []
            if op is sre_parse.SUBPATTERN:
                walk(arg[-1])  # type: ignore[index]
            elif op is sre_parse.BRANCH:
                for branch in arg[1]:  # type: ignore[index]
                    walk(branch)
            elif op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT):
                walk(arg[2])  # type: ignore[index]
        if current:
            out.append("".join(current))

    walk(sre_parse.parse(pattern.replace(r"\z", r"\Z")))  # RE2's \z is Python's \Z
    return out


def catalogue_phrases() -> set[str]:
    """The phrases the built-in catalogue matches on: literal runs of its families' and wordings' regexes
    that read as a wording (at least two words and 10 characters; status names are in `UPSTREAM`)."""
    patterns = [p.pattern for family in catalogue().families for p in family.patterns]
    patterns += [w.pattern.pattern for w in wordings().values()]
    phrases = set()
    for pattern in patterns:
        for run in _runs(pattern):
            run = run.strip(" :'\"")
            if len(run) >= 10 and " " in run:
                phrases.add(run)
    return phrases


def violations(path: str, source: str, phrases: set[str]) -> list[str]:
    """Where `source` (the file `path`) matches on a catalogue phrase or an upstream wording."""
    found = []
    wording_set = {w.lower() for w in (*phrases, *UPSTREAM)}
    for how, line, text in matched_strings(source):
        if (path, text) in ALLOWED:
            continue
        low = text.lower()
        hits = sorted(w for w in wording_set if w in low)
        if how == "regex" and not hits:
            hits = _regex_hits(text)
        if hits:
            found.append(f"{path}:{line}: {how} {text[:80]!r} holds {', '.join(hits[:3])}")
    return found


def _regex_hits(pattern: str) -> list[str]:
    """The upstream wordings a regex of the code is written for: it matches most of the wording (60 % of
    its characters or more), and the match holds one of the regex's own literal runs of 4+ characters (so
    a generic shape, `[a-z0-9]+` or `\\b[A-Z][A-Z_]{3,}\\b`, is not one)."""
    try:
        compiled = re.compile(pattern.replace(r"\z", r"\Z"), re.IGNORECASE)
        runs = [run.lower() for run in _runs(pattern) if len(run.strip()) >= 4]
    except re.error:
        return []
    hits = []
    for wording in UPSTREAM:
        found = compiled.search(wording)
        if found is None or len(found.group()) < 0.6 * len(wording):
            continue
        if any(run in found.group().lower() for run in runs):
            hits.append(wording)
    return hits


def _product_files() -> list[Path]:
    return [
        path
        for folder in PRODUCT
        for path in sorted((ROOT / folder).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in LOADER
    ]


def test_no_failure_wording_outside_the_catalogue() -> None:
    phrases = catalogue_phrases()
    assert len(phrases) > 200  # the extraction reads the catalogue (89 families and their wordings)
    found = [
        v
        for path in _product_files()
        for v in violations(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"), phrases)
    ]
    assert not found, (
        "failure wordings in product code: move each into ops/diagnosis/faults.yaml (a family, or "
        "`wordings:` read "
        "with ops.diagnosis.wordings.wording) or allow it here with the reason:\n" + "\n".join(found)
    )


@pytest.mark.parametrize(
    "source",
    [
        'full = "No space left on device" in text',
        'if line.startswith("Traceback (most recent call last)"): pass',
        '_OOM = linear(r"(?i)out of mem(?:ory)?")',
        '_DEADLINE = re.compile(r"deadline[_ ]exceeded", re.I)',
        'x = reason == "KV cache is needed, which is larger than the available KV cache memory"',
    ],
)
def test_the_check_finds_a_wording_written_in_code(source: str) -> None:
    assert violations("ops/example.py", source, catalogue_phrases()), source


def test_messages_the_bot_writes_are_not_matching() -> None:
    source = (
        'raise OpsError("out of memory on the VM: lower --max-model-len")\n"""Traceback (most recent call)"""'
    )
    assert violations("ops/example.py", source, catalogue_phrases()) == []


def test_every_allowed_match_still_exists() -> None:
    """An allowance whose string left the file is removed too (no dead entries)."""
    for path, text in ALLOWED:
        matched = {t for _, _, t in matched_strings((ROOT / path).read_text(encoding="utf-8"))}
        assert text in matched, (path, text)


def test_the_catalogue_file_is_the_builtin_one() -> None:
    assert BUILTIN_PATH == ROOT / "ops" / "diagnosis" / "faults.yaml"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("wordings: [{name: x-y, use: u, patterns: ['(?<=a)b']}]", "does not compile as RE2"),
        ("wordings: [{name: x-y, patterns: [a]}]", "use: Field required"),
        ("wordings: [{name: x-y, use: u, patterns: []}]", "patterns: List should have at least 1 item"),
        (
            "wordings: [{name: x-y, use: u, patterns: [a], colour: red}]",
            "colour: Extra inputs are not permitted",
        ),
        ("wordings: [{name: x-y, use: u, patterns: [a]}, {name: x-y, use: v, patterns: [b]}]", "used twice"),
        ("families: []", "expected a `wordings:` list"),
    ],
)
def test_a_bad_wording_is_refused_naming_it(tmp_path: Path, body: str, problem: str) -> None:
    path = tmp_path / "faults.yaml"
    path.write_text(body + "\n")
    with pytest.raises(ValueError, match=re.escape(problem)):
        load_wordings(path)


def test_a_team_file_cannot_carry_wordings(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text("families: []\nwordings: [{name: x-y, use: u, patterns: [a]}]\n")
    with pytest.raises(ValueError, match="belong to the built-in catalogue"):
        load_file(path)


def test_every_wording_of_the_code_exists_and_has_sources() -> None:
    names = set(re.findall(r'wording\("([a-z0-9-]+)"\)', "".join(p.read_text() for p in _product_files())))
    names |= set(
        re.findall(r'says\("([a-z0-9-]+)"\)', (ROOT / "ops" / "diagnosis" / "zonefit.py").read_text())
    )
    assert names and names <= set(wordings()), names - set(wordings())
    assert set(wordings()) <= names, f"wordings nothing reads: {set(wordings()) - names}"
    assert all(w.sources and w.use for w in wordings().values())
