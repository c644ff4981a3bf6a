"""The fault catalogue: failure families as data (`ops/diagnosis/faults.yaml`), one matcher, evidence
extraction.

A family (see the header of `ops/diagnosis/faults.yaml` for the file format) has several wordings (regexes
from vLLM, tpu-inference, torch_xla, JAX, Docker, Hugging Face and Google texts), a severity, the figures its
named groups extract, a conclusion and a fix written as templates filled from the figures and from the live
`FixFacts` (model, accelerator type and chips, tensor parallel size, `max_model_len`, vLLM flags), an
optional runbook, and for create errors of queued resources a classification (permanent for the zone or
transient). Teams add their own families in a file of the same format (`FAULT_CATALOGUE_FILE`, see
`use_extra_file`); matching uses both. What a line names (a repository, an image, a zone, an accelerator
type, ...) is checked by its kind and replaces the deployment's value of that field (`figures`,
`ops.diagnosis.evidence`): a fix is about what failed.

Resolution: on each line the matching wording of the most specific family wins (its `specificity`, then
the longer match), so "403 not in the authorized list" beats the 401 wording of the same burst; a family
may also `suppress` others anywhere in the same text (a 403 makes the 401 lines around it the same
incident).

The file's `wordings:` hold the other upstream texts the code reads (docker's root-cause words, a create
error's status codes, a server's context-length refusal), read by `ops.diagnosis.wordings`: every failure
wording lives in the catalogue file (tests/unit/test_fault_wordings.py fails on one written in the code).

`key_lines` picks the few lines that carry the cause of any failure text: the root exception, its "caused
by" chain, the first error of the burst; generic traceback frames never rank above them.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ops.datafile import DataFileError, line_of, load
from ops.diagnosis.evidence import checked, named_fields
from ops.diagnosis.schema import (
    QUEUED_RESOURCE_STATES,
    CatalogueFile,
    FamilyEntry,
    queued_resource_states,
)
from ops.linear import LinearMatch, LinearPattern, PatternSet, linear

__all__ = [
    "ALLOW_SECOND",
    "BUILTIN_PATH",
    "QUEUED_RESOURCE_STATES",
    "SEVERITIES",
    "Catalogue",
    "Family",
    "FixFacts",
    "Match",
    "catalogue",
    "chips_of",
    "figures",
    "fill",
    "is_exception_line",
    "is_traceback_line",
    "key_lines",
    "load_file",
    "shorten",
    "use_extra_file",
]

BUILTIN_PATH = Path(__file__).with_name("faults.yaml")
SEVERITIES = ("critical", "error", "warning", "info")
"""Most severe first. critical: the server cannot start, died, or the resource is gone; error: a failure
whose real cause may be elsewhere (a symptom); warning: a client error or a transient condition while the
rest is healthy; info: a hint."""

_FIELD = linear(r"\{(\w+)\}")
_ANY_FIELD = linear(r"\{(!?)(\w+)\}")  # "{!name}": a field inside a code span, filled shell-quoted
_PIECE = linear(r"\[([^\[\]]*)\]|\{(!?)(\w+)\}")  # an optional segment, or a field outside one
_CODE = linear(r"`[^`]*`")
_ACCELERATOR = linear(r"^v(\d+)([a-z]*)-(\d+)$")
ALLOW_SECOND = "--allow-second"
"""The flag /tpu create, find and recover take to go on beside an ACTIVE primary (bot.shared.zone_plan's
`already_running`), filled as the `{allow_second}` field."""
EVIDENCE_CHARS = 200
"""An evidence line longer than this is shortened in the middle (`shorten`), never across its deciding
words."""


@dataclass(frozen=True)
class Family:
    """One failure family of the catalogue.

    Attributes:
        name: stable id, e.g. "kv-cache-insufficient".
        title: a few words for people.
        severity: one of SEVERITIES.
        specificity: larger wins when two families match the same line (default 10).
        patterns: the wordings, compiled.
        conclusion, fix: templates (see `fill`).
        fix_when: fix templates for a queued resource in a given state (e.g. "FAILED": delete or recover
            it), which replace `fix` when the facts' `state` is one of them (see `fix_for`, `FixFacts.state`).
        runbook: the team's own text for this family ("" for none); shown and given to the model.
        suppresses: families dropped when this one is found in the same text.
        create: for create errors: {"kind": "permanent"|"transient", "reason": template, "scope":
            "zone"|"request"}; empty when the family is not a create outcome.
        sources: public documents or source files the wordings come from.
        context: "engine-core" to attach the EngineCore lines before it (the root cause of a start-up
            failure), else "".
        origin: "built-in" or the path of the team file it came from.
    """

    name: str
    title: str
    severity: str
    specificity: int
    patterns: tuple[LinearPattern, ...]
    conclusion: str
    fix: str
    runbook: str = ""
    suppresses: tuple[str, ...] = ()
    create: Mapping[str, str] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    context: str = ""
    origin: str = "built-in"
    fix_when: Mapping[str, str] = field(default_factory=dict)

    def fix_for(self, state: str | None) -> str:
        """The fix template for a queued resource in `state` (a TPU API `QueuedResourceState` name, e.g.
        "FAILED"): its `fix_when` variant, else the general `fix` (also for None: no resource concerned)."""
        return self.fix_when.get(state or "", self.fix)


@dataclass(frozen=True)
class FixFacts:
    """The live facts a fix is written with: what the deployment concerned serves and where, read when the
    finding is made, that a family's fix template is filled from (`figures`, `fill`). Every field is
    optional: a missing one drops the parts of a fix template that need it.

    Attributes:
        model: served model, e.g. "google/gemma-4-31B-it".
        image: the vLLM container image, e.g. "vllm/vllm-tpu:gemma4".
        accelerator_type: e.g. "v6e-8" (TPU API `acceleratorType`).
        tensor_parallel_size: vLLM `--tensor-parallel-size`.
        max_model_len: vLLM `--max-model-len`, tokens.
        flags: the vLLM command-line flags in use, e.g. ("--enable-auto-tool-choice", ...).
        zone, name: where the queued resource lives and its name.
        stale_resources: FAILED/SUSPENDED queued resources ("name (zone, STATE)") that hold quota.
        state: the state of the queued resource concerned (TPU API `QueuedResourceState`, e.g. "FAILED";
            https://cloud.google.com/tpu/docs/reference/rest/v2alpha1/projects.locations.queuedResources#state),
            which picks a family's `fix_when` variant; None when no resource is concerned.
        owners: the nodes read with their queued resources, as (node id, resource name, zone, state): a
            finding whose evidence names one of them is about the resource that owns it (`about`), not the
            one concerned; () when none were read.
        running_primary: the deployment's primary (TPU_PRIMARY, picked by zone and name with
            `ops.tpu.model.primary_among`) as (name, zone) when it was read ACTIVE or PROVISIONING, else
            None. A fix for another resource that creates capacity (/tpu recover, create, find) would start
            a second TPU beside it, which the bot refuses without --allow-second, so the fix's
            `{allow_second}` field says it (`values`).
    """

    model: str | None = None
    image: str | None = None
    accelerator_type: str | None = None
    tensor_parallel_size: int | None = None
    max_model_len: int | None = None
    flags: tuple[str, ...] = ()
    zone: str | None = None
    name: str | None = None
    stale_resources: tuple[str, ...] = ()
    state: str | None = None
    owners: tuple[tuple[str, str, str, str], ...] = ()
    running_primary: tuple[str, str] | None = None

    def about(self, extracted: Mapping[str, str]) -> FixFacts:
        """These facts for a finding whose evidence is `extracted` (a match's named groups): when it names a
        node (a valid `node` value) that one of `owners` owns, the facts of that resource (its name, zone and
        state: the fix acts on the resource the evidence is about, not on the one concerned, which is the
        deployment's primary when nothing else is); otherwise the facts as they are (a resource's own state
        may name a node by an id the listing does not show)."""
        node = checked(extracted).get("node")
        for node_id, name, zone, state in self.owners if node else ():
            if node_id == node:
                return replace(self, name=name, zone=zone, state=state)
        return self

    def values(self) -> dict[str, str]:
        """The template fields these facts provide, plus derived sizes (see `fill`)."""
        out: dict[str, str] = {}
        if self.model:
            out["model"] = self.model
        if self.image:
            out["image"] = self.image
        if self.accelerator_type:
            out["accelerator_type"] = self.accelerator_type
            chips = chips_of(self.accelerator_type)
            if chips:
                out["chips"] = str(chips)
        if self.tensor_parallel_size:
            out["tp"] = str(self.tensor_parallel_size)
        if self.max_model_len:
            out["current_max_model_len"] = str(self.max_model_len)
            half = _round_down(self.max_model_len // 2, 1024)
            if half >= 1024:
                out["half_max_model_len"] = str(half)
        if self.flags:
            out["flags"] = " ".join(self.flags)
        if self.zone:
            out["zone"] = self.zone
        if self.name:
            out["qr_name"] = self.name
        if self.stale_resources:
            out["stale_resources"] = ", ".join(self.stale_resources)
        if self.state:
            out["qr_state"] = self.state
        if self.beside_primary():
            out["allow_second"] = ALLOW_SECOND
        chips_n = int(out.get("chips", "0"))
        tp = self.tensor_parallel_size or 0
        if chips_n and tp and tp < chips_n:
            out["tp_up"] = str(min(chips_n, tp * 2))
        return out

    def beside_primary(self) -> bool:
        """Whether a command creating capacity for the resource these facts are about would start a second
        TPU beside the running primary (`running_primary` is set and is not that resource; a resource of
        the primary's name without a zone is the primary)."""
        if self.running_primary is None:
            return False
        name, zone = self.running_primary
        return (self.name, self.zone or zone) != (name, zone) if self.name else False


def chips_of(accelerator_type: str) -> int | None:
    """Chips of an accelerator type: v5e/v5litepod/v6e names count chips (v6e-8: 8); v2, v3, v4 and v5p
    names count TensorCores, two per chip (v4-8: 4 chips). Source:
    https://cloud.google.com/tpu/docs/system-architecture-tpu-vm#versions. None for an unknown name."""
    match = _ACCELERATOR.match(accelerator_type)
    if not match:
        return None
    version, variant, count = int(match.group(1)), match.group(2), int(match.group(3))
    if version >= 6 or variant in ("e", "litepod"):
        return count
    return max(1, count // 2)


def _round_down(value: int, step: int) -> int:
    return value - value % step


def figures(extracted: Mapping[str, str], facts: FixFacts | None = None) -> dict[str, str]:
    """The values a template is filled with: the live `facts`, then the figures extracted from the text
    (which win), then derived sizes: `fit_max_model_len` (an estimate vLLM printed, rounded down to 256
    tokens, else the model's derived limit), `tp_choices` (sizes that divide the attention heads and fit
    the chips), and a provisioning model in the bot's words ("flex-start", "spot", "on-demand").

    What the evidence names is checked by its kind first (`ops.diagnosis.evidence.checked`: a repo id, an
    image reference, a zone, ...): a valid value replaces the deployment's (the fix is about what failed),
    an invalid one is dropped together with the deployment's value of that field, which would contradict
    what the line named."""
    valid = checked(extracted)
    deployment = facts.values() if facts else {}
    for name in named_fields(extracted) - valid.keys():
        deployment.pop(name, None)
    if "accelerator_type" in valid:  # the chips of the deployment's type are not those of the named one
        for name in ("chips", "tp_up"):
            deployment.pop(name, None)
    values = {**deployment, **valid}
    if "accelerator_type" in valid and (chips := chips_of(valid["accelerator_type"])):
        values["chips"] = str(chips)
    _derive(values)
    return values


def _derive(values: dict[str, str]) -> None:
    estimate = values.get("estimated_max_model_len") or values.get("kv_tokens")
    if estimate and estimate.isdigit():
        fit = int(estimate)
        values["fit_max_model_len"] = str(_round_down(fit, 256) if fit >= 512 else fit)
    derived = values.get("derived_max_model_len")
    if "fit_max_model_len" not in values and derived and derived.isdigit():
        values["fit_max_model_len"] = derived
    heads, chips = values.get("heads"), values.get("chips") or values.get("devices")
    if heads and heads.isdigit():
        limit = int(chips) if chips and chips.isdigit() else int(heads)
        choices = [n for n in (1, 2, 4, 8, 16, 32, 64) if n <= limit and int(heads) % n == 0]
        if choices:
            values["tp_choices"] = ", ".join(str(n) for n in choices)
    model = values.get("provisioning_model")
    if model:
        values["provisioning_model"] = _PROVISIONING_LABELS.get(model.lower(), model.lower())


_PROVISIONING_LABELS = {
    "flex_start": "flex-start",
    "flex-start": "flex-start",
    "spot": "spot",
    "standard": "on-demand",
    "reservation_bound": "reserved",
}


def fill(template: str, values: Mapping[str, str]) -> str:
    """Fill a conclusion or fix template.

    `{name}` is replaced by `values[name]`; a `[...]` segment is kept (without the brackets) only when
    every field in it has a value, so "[now {current_max_model_len}]" disappears without the live facts.
    A field outside brackets with no value becomes "?". A field inside a code span (`...`, a shell
    command the reader may paste) gets its value shell-quoted (`shlex.quote`). The template is read once:
    a value is never read again as a template, whatever braces or brackets a log line put in it.
    """
    template = _CODE.sub(lambda code: _FIELD.sub(lambda f: "{!" + f.group(1) + "}", code.group(0)), template)

    def value(quoted: str, name: str) -> str:
        found = values.get(name) or ""
        return shlex.quote(found) if quoted and found else found

    def piece(match: LinearMatch) -> str:
        inner = match.group(1)
        if inner is None:  # a field outside brackets
            return value(match.group(2), match.group(3)) or "?"
        if all(values.get(m.group(2)) for m in _ANY_FIELD.finditer(inner)):
            return _ANY_FIELD.sub(lambda m: value(m.group(1), m.group(2)), inner)
        return ""

    return " ".join(_PIECE.sub(piece, template).split())


@dataclass(frozen=True)
class Match:
    """One family found in a text.

    Attributes:
        family: the Family.
        first: index of the first matching line; last: of the last one.
        evidence: the first matching line (stripped, at most 400 characters).
        count: matching lines.
        values: figures from the named groups (the first value of each name wins).
    """

    family: Family
    first: int
    last: int
    evidence: str
    count: int
    values: dict[str, str]


class Catalogue:
    """Families from the built-in file and any team files, with the matcher.

    Args:
        families: in file order (built-in first); a team family with a built-in's name replaces it.
    """

    def __init__(self, families: Iterable[Family]) -> None:
        by_name: dict[str, Family] = {}
        for family in families:
            by_name[family.name] = family
        self.families: tuple[Family, ...] = tuple(by_name.values())
        self._by_name = by_name
        self._patterns = [(family, pattern) for family in self.families for pattern in family.patterns]
        self._matcher = PatternSet(pattern.pattern for _, pattern in self._patterns)

    def __getitem__(self, name: str) -> Family:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def best(self, line: str, *, only_create: bool = False) -> tuple[Family, LinearMatch] | None:
        """The most specific family matching one line (specificity, then match length), or None; of one
        family's wordings, the one that extracts more figures, then the longer.

        One pass of an RE2 set of every pattern tells which match at all (time linear in the line, however
        many patterns); only those are run again for their span and named groups.
        """
        found: tuple[Family, LinearMatch] | None = None
        for index in self._matcher.matching(line):
            family, pattern = self._patterns[index]
            if only_create and not family.create:
                continue
            match = pattern.search(line)
            if match is not None and (found is None or _better((family, match), found)):
                found = (family, match)
        return found

    def match(self, text: str, *, only_create: bool = False) -> list[Match]:
        """Every family found in `text`, line by line, each line going to its most specific family.

        Args:
            text: any log or error text.
            only_create: consider only families that classify create errors.

        Returns:
            Matches in order of first occurrence, without the families suppressed by another one found.
            Lines of one family are one match unless their figures differ (e.g. two requests with different
            limits are two matches).
        """
        found: dict[str, list[Match]] = {}
        for index, raw in enumerate(text.splitlines()):
            if raw.lstrip().startswith("# "):
                continue  # a comment (case-file header, Prometheus HELP/TYPE), not a message
            hit = self.best(raw, only_create=only_create)
            if hit is None:
                continue
            family, match = hit
            values = {k: v for k, v in match.groupdict().items() if v is not None}
            same = found.setdefault(family.name, [])
            for position, old in enumerate(same):
                if all(old.values.get(k, v) == v for k, v in values.items()):
                    merged = {**values, **old.values}
                    same[position] = Match(family, old.first, index, old.evidence, old.count + 1, merged)
                    break
            else:  # a first sighting, or different figures (another request, another limit): its own match
                same.append(Match(family, index, index, shorten(raw, match.span()), 1, values))
        dropped = {name for matches in found.values() for m in matches for name in m.family.suppresses}
        kept = [m for name, matches in found.items() if name not in dropped for m in matches]
        return sorted(kept, key=lambda m: m.first)


def _rank(family: Family, match: LinearMatch) -> tuple[int, int]:
    return (family.specificity, match.end() - match.start())


def _better(new: tuple[Family, LinearMatch], old: tuple[Family, LinearMatch]) -> bool:
    """Whether `new` decides a line rather than `old`: the more specific family, then the longer match;
    between two wordings of one family, the one that names more (figures, the repository, the zone...)."""
    if new[0] is old[0]:
        return (_named(new[1]), *_rank(*new)) > (_named(old[1]), *_rank(*old))
    return _rank(*new) > _rank(*old)


def _named(match: LinearMatch) -> int:
    return sum(value is not None for value in match.groupdict().values())


def shorten(line: str, keep: tuple[int, int] | None = None, limit: int = EVIDENCE_CHARS) -> str:
    """An evidence line fitted to `limit` characters, cut in the middle, never inside `keep`.

    Args:
        line: one log line or error message.
        keep: the (start, end) character span that decided the family (the pattern's match in `line`); it
            stays whole, with as much of the line before it (time, process prefix) and after it as fits.
            None: the line's start and end are kept and its middle cut.
        limit: the most characters returned (each cut is one "…").

    Returns:
        The line, stripped, unchanged when it fits.
    """
    if len(line.strip()) <= limit:
        return line.strip()
    start, end = keep if keep is not None else (len(line) // 2, len(line) // 2)
    if end - start >= limit - 2:  # the decisive span alone is too long: keep its two ends
        half = (limit - 1) // 2
        return (line[start : start + half] + "…" + line[end - (limit - 1 - half) : end]).strip()
    room = limit - (end - start) - 2
    tail = line[end:]
    tail_room = max(room // 3, room - len(line[:start]))
    if len(tail) > tail_room:
        tail = tail[: max(tail_room - 1, 0)] + "…"
    head = line[:start]
    head_room = limit - (end - start) - len(tail)
    if len(head) > head_room:
        first = head_room // 2
        head = head[:first] + "…" + head[len(head) - (head_room - first - 1) :]
    return (head + line[start:end] + tail).strip()


# ---- loading ----------------------------------------------------------------------------------------------


def load_file(path: str | Path, *, origin: str | None = None) -> list[Family]:
    """Read and check a catalogue file against its schema (`ops.diagnosis.schema.CatalogueFile`).

    Args:
        path: a YAML file: `families:` a list of mappings (see the header of `ops/diagnosis/faults.yaml`).
        origin: what to record as the families' origin (default: the path).

    Returns:
        The families, in file order.

    Raises:
        ops.datafile.DataFileError (a ValueError): every problem as "FILE:LINE: where: what" (unreadable
            file, bad YAML, unknown field, missing name/patterns/conclusion/fix, bad severity, a regex that
            does not compile as RE2, a `fix_when` key that is not a queued-resource state), or `wordings:`
            in a team file. A template field that nothing fills is allowed: it shows "?" (see `fill`).
    """
    where = str(path)
    data, root = load(path, CatalogueFile)
    if data.families is None:
        raise DataFileError(f"{where}:{line_of(root, ())}: expected a `families:` list")
    if data.wordings is not None and Path(path).resolve() != BUILTIN_PATH.resolve():
        line = line_of(root, ("wordings",))
        raise DataFileError(
            f"{where}:{line}: `wordings:` belong to the built-in catalogue; a team file adds families"
        )
    return [_family(entry, origin or where) for entry in data.families]


def _family(entry: FamilyEntry, origin: str) -> Family:
    fix_when = {
        state: " ".join(text.split())
        for key, text in entry.fix_when.items()
        for state in queued_resource_states(key)
    }
    create = entry.create.model_dump() if entry.create is not None else {}
    return Family(
        name=entry.name,
        title=entry.title or entry.name,
        severity=entry.severity,
        specificity=entry.specificity,
        patterns=tuple(linear(raw) for raw in entry.patterns),
        conclusion=" ".join(entry.conclusion.split()),
        fix=" ".join(entry.fix.split()),
        runbook=entry.runbook.strip(),
        suppresses=tuple(entry.suppresses),
        create=create,
        sources=tuple(entry.sources),
        context=entry.context,
        origin=origin,
        fix_when=fix_when,
    )


_lock = threading.Lock()
_extra: Path | None = None
_cached: Catalogue | None = None


def use_extra_file(path: str | Path | None) -> Catalogue:
    """Use a team's catalogue file beside the built-in one from now on (None: built-in only).

    Called once at start-up from the validated `FAULT_CATALOGUE_FILE` setting.

    Returns:
        The combined catalogue.

    Raises:
        ValueError: the file is not a valid catalogue (see `load_file`).
    """
    global _extra, _cached
    combined = _build(Path(path) if path else None)
    with _lock:
        _extra, _cached = (Path(path) if path else None), combined
    return combined


def catalogue() -> Catalogue:
    """The catalogue in use: the built-in families plus the team file set by `use_extra_file`."""
    global _cached
    with _lock:
        if _cached is None:
            _cached = _build(_extra)
        return _cached


def _build(extra: Path | None) -> Catalogue:
    families = load_file(BUILTIN_PATH, origin="built-in")
    if extra is not None:
        families += load_file(extra)
    return Catalogue(families)


# ---- evidence ---------------------------------------------------------------------------------------------

# A prefix vLLM, glog and docker put before the message: "(EngineCore_DP0 pid=281) ERROR 04-15 07:21:09
# [core.py:708] ", "(VllmWorker rank=0 pid=412) ", "E0118 22:42:45.737331 20084 tpu_pjrt_client.cc:1889] ",
# an RFC 3339 time stamp.
_PREFIX = linear(
    r"^(?:\S*\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d)?\s+)?"
    r"(?:\((?:\w+)(?: \w+=\d+)*\)\s+)?"
    r"(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\s+\d\d-\d\d [\d:.]+\s+\[[^\]]*\]\s?"
    r"|[IWEF]\d{4} [\d:.]+\s+\d+\s+\S+\]\s)?"
)
_FRAME = linear(r'^\s*(?:File "[^"]*", line \d+|at \S+\(|Traceback \(most recent call last\):|\.\.\.$)')
_EXCEPTION = linear(r"^(?:[\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Fault)\b(?::|$)")
_CHAIN = linear(
    r"(?i)The above exception was the direct cause|During handling of the above exception|^Caused by:"
)
_ERRORISH = linear(
    r"(?i)^(?:ERROR|FATAL|CRITICAL|E\d{4}|F\d{4})\b|\b(?:ERROR|FATAL)\b|\berror\b|\bfailed\b|\bfailure\b|"
    r"\brefused\b|\bdenied\b|\bcannot\b|\bcould not\b|\bunable to\b|\bexceeded\b|\bno space\b|"
    r"\bnot found\b|\btimed? ?out\b|\bKilled\b|\bexited\b|\bRESOURCE_EXHAUSTED\b|\bNOT_FOUND\b|"
    r"\bnot supported\b|\binvalid\b|\bforbidden\b|\bunauthori[sz]ed\b|\brestricted\b|\bexhausted\b"
)
_DIGITS = linear(r"\d+")


def _message(line: str) -> str:
    return _PREFIX.sub("", line.strip(), count=1).strip()


# What Python prints between a traceback's frames besides them: the source line under a frame (indented 4+
# spaces), the 3.11+ position markers (^^^^, ~~~~) and the chain markers.
_CODE_LINE = linear(r"^\s{4,}[^\s*•-]")
_MARKERS = linear(r"^\s*[~^]+\s*$")


def is_traceback_line(line: str) -> bool:
    """Whether one log line (with or without a vLLM/glog/time-stamp prefix) is part of a traceback's body
    rather than a message: "Traceback (most recent call last):", a frame (`File "...", line N, in f`, Java's
    `at f(...)`), the source line printed under a frame, a ^^^^ position marker, a "During handling of the
    above exception" / "direct cause" / "Caused by:" marker. The exception line that ends a traceback is
    not one (`is_exception_line`). Layout of Python tracebacks:
    https://docs.python.org/3/library/traceback.html"""
    if not line.strip():
        return False
    body = _PREFIX.sub("", line.lstrip("\r\n").rstrip(), count=1)
    message = body.strip()
    if _FRAME.match(message) or _CHAIN.search(message) or _MARKERS.match(body):
        return True
    # an indented line that names a known failure (a docker "  * write ...: no space left") is a message
    return bool(_CODE_LINE.match(body)) and not _EXCEPTION.match(message) and catalogue().best(line) is None


def is_exception_line(line: str) -> bool:
    """Whether one log line (prefix allowed) is an exception line, e.g. "RuntimeError: ..." or
    "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: ...": what ends a Python traceback."""
    return bool(_EXCEPTION.match(_message(line)))


def key_lines(text: str, limit: int = 5) -> list[str]:
    """The few lines that carry the cause of a failure, top to bottom.

    Chosen, most important first, then shown in log order: the root exception (the first exception line:
    Python prints the cause of a chain first), the last exception (what finally failed), each exception
    after a "direct cause" / "during handling" / "Caused by:" marker, the first error line of the burst,
    then other exception and error lines. Traceback frames (`File "...", line N`), their code lines and
    repeated messages are never chosen. Empty when no line looks like an error (a healthy log).

    Args:
        text: any log or error text.
        limit: at most this many lines.

    Returns:
        Lines (stripped, at most 400 characters each) in their order in the text.
    """
    lines = text.splitlines()
    candidates: list[tuple[int, int]] = []  # (rank, index): lower rank first
    seen: set[str] = set()
    exceptions: list[int] = []
    errors: list[int] = []
    chained: list[int] = []
    after_frame = False
    after_chain = False
    for index, raw in enumerate(lines):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        message = _message(raw)
        if _FRAME.match(message):
            after_frame = message.startswith("File ")
            continue
        if after_frame and raw.startswith((" ", "\t")) and not _EXCEPTION.match(message):
            after_frame = False  # the source line printed under a frame
            continue
        after_frame = False
        if _CHAIN.search(message):
            after_chain = True
            continue
        key = _DIGITS.sub("#", message)
        if key in seen:
            continue
        if _EXCEPTION.match(message):
            seen.add(key)
            exceptions.append(index)
            if after_chain:
                chained.append(index)
        elif _ERRORISH.search(message):
            seen.add(key)
            errors.append(index)
        after_chain = False
    if exceptions:
        candidates.append((0, exceptions[0]))
        candidates.append((1, exceptions[-1]))
    candidates += [(2, i) for i in chained]
    if errors:
        candidates.append((3, errors[0]))
    candidates += [(4, i) for i in exceptions[1:-1]]
    candidates += [(5, i) for i in errors[1:]]
    chosen: list[int] = []
    for _, index in sorted(candidates):
        if index not in chosen:
            chosen.append(index)
        if len(chosen) == limit:
            break
    return [shorten(lines[i]) for i in sorted(chosen)]
