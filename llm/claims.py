"""The check between the model and Slack: every claim in a model's answer must come from what the bot read.

A model's text is a claim, not a fact. Before it is posted, `check_answer` reads it sentence by sentence,
as it reads (`llm.grounding.canonical_text`: look-alike characters, zero-width characters and full-width
digits folded, so none hides a name, a state or a number), names in any case and with a possessive:

- chat-template tokens (`<start_of_turn>`, `<|turn>`, `<|im_start|>`, ...) end the answer: what follows is
  an invented next turn; a thinking channel (`<|channel>thought ... <channel|>`) is dropped;
- shell commands (in code, fenced or not, or written out: `sudo ...`, `curl ...`, `gcloud compute ...`) are
  never shown: only this bot's own commands, and only those that parse as one (`parses`); a bot command is
  a claim too: one the bot does not offer for the question's subject (`offered`: a change seen only in
  data, logs, tool results or thread messages) is removed, and said (`Checked.unoffered`);
- sentences that repeat the bot's instructions to the model (`prompt`), and repeated or looping text, go;
- each claim (a resource or node name, zone, region, accelerator type, number with a unit, price, date,
  time, version, URL, bot command) must appear in `evidence`, the facts and tool results the model was
  given; a sentence with a claim that does not, or that gives a resource a state the facts deny
  (`llm.grounding.contradictions`), is removed and the removal is said;
- each claim must rest on evidence about what its sentence is about (`scope`): the subjects the sentence
  names, else those the question asks about. A sentence about `gemma4-old` whose claim is found only in
  evidence about other subjects (another node's log line, another deployment's metrics) is removed; one
  that names the other subject plainly is about it and may rest on its evidence. A quoted block is about
  what the sentence before it names, else what the question asks about, whatever names its lines carry
  (a log line names its node), and so is a sentence copied whole from the evidence, unless it starts with
  a name (a listing's line). A sentence that tells a failure as happening now while one of its claims is
  found only in evidence of earlier events is removed too;
- a sentence is about the queued resources it names (`llm.grounding.Scope.told_of`: a deployment named beside
  them says where it was read), else the deployments it names; its claims count as found in those subjects'
  facts, never the question's (`Checked.found_in`). An answer whose every sentence that names or claims
  anything is about other subjects does not answer the question: it is withheld, saying whom it was about
  (`Checked.strayed`); one that tells nothing of one of the question's subjects says so
  (`Checked.unanswered`);
- an answer the model stopped at its token limit is marked as cut;
- when too little survives, the whole answer is withheld, with one line saying why (the facts are shown
  either way).

Pure logic (no I/O). Template tokens: https://ai.google.dev/gemma/docs/formatting (Gemma 3),
https://ai.google.dev/gemma/docs/core/prompt-formatting-gemma4 (Gemma 4), and the ChatML / Llama 3 markers
other servers' templates use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from llm.grounding import Evidence, Scope, canonical_text, contradictions, segments, split_after
from ops.linear import LinearMatch, linear
from ops.tpu.model import ZONE_PATTERN

__all__ = ["Checked", "FoundIn", "Removal", "check_answer"]

ECHO_WORDS = 6
"""A sentence sharing a run of this many words with the bot's instructions to the model is an echo."""
MIN_KEPT_WORDS = 3
"""Fewer words than this left after the check: the answer is withheld."""
QUOTE_WORDS = 4
"""A sentence of at least this many words found whole in the evidence is a copy of it (a quote)."""
LOOP_UNIQUE_SHARE = 0.35
"""A sentence of more than 12 words whose distinct words are under this share of its words is a loop."""

# A turn marker ends the answer; the thinking channel is dropped; other control tokens are removed.
_TURN = linear(
    r"(?i)<start_of_turn>|<end_of_turn>|<\|turn>|<turn\|>|<\|im_start\|>|<\|im_end\|>|<\|eot_id\|>|"
    r"<\|start_header_id\|>|<\|end_header_id\|>|<\|endoftext\|>|<\|end\|>|<\|user\|>|<\|assistant\|>|"
    r"<\|system\|>|</s>|\[INST\]|\[/INST\]|<eos>|<\|eos\|>"
)
_THINKING = linear(r"(?s)<\|channel>.*?(?:<channel\|>|$)|<think>.*?(?:</think>|$)")
_CONTROL = linear(
    r"<bos>|<s>|<\|begin_of_text\|>|<pad>|<\|[a-z_\"]{1,20}\|>|<\|[a-z_]{1,20}>|<[a-z_]{1,20}\|>"
)
_ROLE_WORD = linear(r"(?i)^\s*(?:model|assistant|user|system)\s*\n")

# Shell: code spans and fenced blocks, and commands written out in prose.
_FENCE = linear(r"(?s)```(?:[a-zA-Z0-9_+-]*\n)?(.*?)(?:```|$)")
_QUOTED = "\x00quoted {}\x00"
_SHELL_WHY = "a shell command (only this bot's own commands are shown)"
_GONE = "\x00gone\x00"
"""Where a fenced block was removed: a sentence ending in ":" just before it introduced it, and goes too."""
_CODE_SPAN = linear(r"`([^`\n]+)`")
_SHELL_START = linear(
    r"^\s*(?:\$\s+|#\s+)?(?:sudo|curl|wget|gcloud|gsutil|kubectl|docker|podman|systemctl|journalctl|ssh|scp|"
    r"rm|mv|cp|chmod|chown|kill|pkill|killall|pip|pip3|python|python3|bash|sh|zsh|apt|apt-get|yum|dnf|"
    r"export|set|unset|echo|cat|tee|sed|awk|git|helm|terraform|make|vllm|huggingface-cli|hf|nvidia-smi|"
    r"tpu-info|reboot|shutdown|dd|mkfs|crontab|nohup|env|source)\s+\S"
)
_SHELL_IN_PROSE = linear(
    r"(?m)^\s*\$\s+\S|\bsudo\s+\S|\bcurl\s+(?:-|https?:)|\bwget\s+(?:-|https?:)|\brm\s+-|\bkubectl\s+\S|"
    r"\bgcloud\s+(?:compute|alpha|beta|config|auth|logging|projects|services|container|storage)\b|"
    r"\bgsutil\s+(?:cp|rm|ls|mv)\b|\bpip3?\s+install\b|\bapt(?:-get)?\s+install\b|\bvllm\s+serve\s+\S|"
    r"\bdocker\s+(?:run|exec|rm|rmi|kill|stop|restart|pull|push|system|compose)\s+(?:-|\S*[/:])|"
    r"\bsystemctl\s+(?:start|stop|restart|enable|disable|kill)\s+\S"
)

# Claims, each checked against the evidence (see `_claims`).
_URL = linear(r"https?://[^\s`<>)\]]+")
_BOT_COMMAND = linear(r"(?:^|[\s`(\"'])(/[a-z][a-z0-9/_-]*(?:[ \t]+[^\s`\"',;:!?)]*[^\s`\"'.,;:!?)])*)")
_ZONE = linear(rf"\b{ZONE_PATTERN}\b")
_REGION = linear(r"\b(?:us|europe|asia|australia|northamerica|southamerica|me|africa)-[a-z]+[0-9]+\b")
_ACCELERATOR = linear(r"(?i)\bv[0-9]+[a-z]*-(?:litepod-)?[0-9]+\b")
_VERSION = linear(r"\bv?[0-9]+\.[0-9]+\.[0-9]+(?:[.-][0-9a-z]+)*\b")
_DATE = linear(r"\b[0-9]{4}-[0-9]{2}-[0-9]{2}\b")
_TIME = linear(r"\b([0-9]{1,2}):([0-9]{2})(?::[0-9]{2})?\b")
_PRICE = linear(r"(?:\$|USD\s?|EUR\s?|[€£¥]\s?)([0-9][0-9,]*(?:\.[0-9]+)?)")
# A number with any unit: a symbol (%, °, °C, ℃) or the word right after it ("15 ms", "3 nodes", "20 km",
# "12 degrees"): whatever it measures, the number must be one the facts hold.
# "a 9-hour stretch" is a number with its unit too.
_QUANTITY = linear(r"\b([0-9][0-9,]*(?:\.[0-9]+)?)(?:\s?|-)(%|°\s?[CFcf]?|℃|℉|[A-Za-z][A-Za-z/]*)")
_UNFOUND = linear(r"^`[^`]*` \((.+)\) is not in the facts$")
_EXIT_CODE = linear(r"(?i)\bexit(?:ed)?(?: with)?(?: code| status)?\s+([0-9]+)\b")
_NAME = linear(r"(?i)\b[a-z][a-z0-9]*(?:-[a-z0-9]+)+\b")
"""A name in any case ("Gemma4-backup", "US-EAST1-D"): ids are lowercase, a model may capitalise them."""
_POSSESSIVE = linear(r"'s$")
_BACKTICKED = linear(r"`([A-Za-z0-9][A-Za-z0-9_._:/-]{1,80})`")
_NUMBER = linear(r"[0-9][0-9,]*(?:\.[0-9]+)?")
_SENTENCE_END = linear(r"[.!?](?:\s+|$)|\n+")
_WORD = linear(r"[a-z0-9]+")
_FIRST_WORD = linear(r"[a-z0-9][a-z0-9-]*")


@dataclass(frozen=True)
class Removal:
    """A part of the answer that was not posted, and why.

    Attributes:
        why: "a shell command", "`us-west1-b` (a zone) is not in the facts", "it repeats the bot's
            instructions", "repeated text", "says gemma4-old is ACTIVE; it is FAILED", "chat-template tokens".
        text: what was removed (kept for the log and the tests; a shell command is never shown).
    """

    why: str
    text: str = ""

    @property
    def shown(self) -> str:
        """`why` as Slack shows it: the kind of a claim not in the facts ("a number not in the facts"),
        never the unchecked claim itself, which would be posted after all."""
        match = _UNFOUND.match(self.why)
        return f"{match.group(1)} not in the facts" if match else self.why


@dataclass(frozen=True)
class FoundIn:
    """Claims and quoted blocks of an answer found in the facts about the same subjects.

    Attributes:
        subjects: the subjects of their sentences as Slack shows them ("`gemma4-qr`"); "" when the answer
            was held to none.
        claims: how many claims.
        quotes: how many quoted blocks.
        asked: whether those subjects are among what the question asks about.
    """

    subjects: str
    claims: int
    quotes: int = 0
    asked: bool = True

    @property
    def counted(self) -> bool:
        """Whether anything was found there."""
        return bool(self.claims or self.quotes)

    @property
    def where(self) -> str:
        """ "for `gemma4-old`" (the question's), "about `gemma4-qr`" (another subject), "" (none)."""
        if not self.subjects:
            return ""
        return f"{'for' if self.asked else 'about'} {self.subjects}"


@dataclass(frozen=True)
class Checked:
    """The checked answer.

    Attributes:
        text: what may be posted ("" when withheld).
        removed: what was not posted, in order.
        withheld: why the whole answer was withheld, "" when it was not.
        cut: the model stopped at its token limit (the text ends where it stopped).
        claims: claims checked and found in the evidence (about what their sentences are about, when a
            scope was given).
        unverified: the claims not found, each as "`x` (a kind)".
        quotes: quoted blocks kept, every line found in the evidence (about what they are told about).
        about: the question's subjects the answer was held to, as Slack shows them ("`gemma4-old`"); ""
            when it was not held to any (no scope, or a question about nothing known).
        found_in: where `claims` and `quotes` were found, by the subjects of their sentences, in the order
            first posted (`FoundIn`): a sentence naming nothing is about what the question asks.
        unanswered: the question's subjects no posted sentence tells anything of, while others do, as Slack
            shows them ("`gemma4-old`"); "" when each is told of, or nothing posted names or claims anything.
        strayed: the whole answer was about other subjects than the question's (every posted sentence
            that names or claims anything): then it is withheld (`withheld` says about whom) and this holds
            those subjects as Slack shows them ("`gemma4-qr`"); "" otherwise.
        unoffered: the bot commands removed because the bot does not offer them, as the model wrote them.
    """

    text: str
    removed: tuple[Removal, ...] = ()
    withheld: str = ""
    cut: bool = False
    claims: int = 0
    unverified: tuple[str, ...] = ()
    quotes: int = 0
    about: str = ""
    found_in: tuple[FoundIn, ...] = ()
    unanswered: str = ""
    strayed: str = ""
    unoffered: tuple[str, ...] = ()

    def summary(self) -> str:
        """One line for the byline, "" when nothing was checked or removed: "checked: 3 claims found in the
        facts for `gemma4-old`; removed: a shell command, ...". It says "checked" only for what was: claims
        and quoted blocks found in the evidence, and in whose facts: those of a sentence about another
        subject are counted as found in its facts ("checked: 2 claims found in the facts for `gemma4-old`,
        3 in those about `gemma4-qr`"), never as the question's."""
        parts = []
        found = self.found_in or (FoundIn("", self.claims, self.quotes),)
        told = [(place.where, _counted(place.claims, place.quotes)) for place in found if place.counted]
        if told:
            (where, counted), rest = told[0], told[1:]
            line = f"checked: {counted} found in the facts" + (f" {where}" if where else "")
            line += "".join(f", {n} in those {other}" for other, n in rest)
            parts.append(line)
        if self.unanswered:
            parts.append(f"nothing in it about {self.unanswered}")
        reasons = list(dict.fromkeys(r.shown for r in self.removed))
        if reasons:
            parts.append("removed: " + "; ".join(reasons))
        if self.cut:
            parts.append("the model stopped at its token limit")
        return " · ".join(parts)


def _counted(claims: int, quotes: int) -> str:
    """ "3 claims and 1 quoted block", "1 claim" (neither zero unless both are)."""
    said = [f"{claims} claim{'s' * (claims != 1)}"] if claims else []
    said += [f"{quotes} quoted block{'s' * (quotes != 1)}"] if quotes else []
    return " and ".join(said)


def _normal(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def _numbers(text: str) -> set[float]:
    found = set()
    for raw in _NUMBER.findall(text):
        try:
            found.add(float(raw.replace(",", "")))
        except ValueError:
            continue
    return found


@dataclass(frozen=True)
class _Lookup:
    text: str
    lowered: str
    numbers: frozenset[float]
    prices: frozenset[float]
    times: frozenset[str]

    @classmethod
    def of(cls, text: str) -> _Lookup:
        times = frozenset(f"{int(h):02d}:{m}" for h, m in _TIME.findall(text))
        prices = frozenset(n for amount in _PRICE.findall(text) for n in _numbers(amount))
        # a quote may wrap or indent differently; the answer is read folded (`canonical_text`), so the facts
        # are too: a "…" the bot cut a line with reads "..." on both sides
        flat = " ".join(canonical_text(text).split()).lower()
        # a sentence's numbers are read with its times taken out ("00:38:27.143740Z" leaves 143740): so are
        # the evidence's
        numbers = _numbers(text) | _numbers(_TIME.sub(" ", text))
        return cls(text, flat, frozenset(numbers), prices, times)

    def has(self, claim: str) -> bool:
        return claim.lower() in self.lowered

    def has_number(self, raw: str, percent: bool = False, price: bool = False) -> bool:
        try:
            value = float(raw.replace(",", ""))
        except ValueError:
            return False
        decimals = len(raw.split(".")[1]) if "." in raw else 0
        for known in self.prices if price else self.numbers:
            candidates = (known, known * 100) if percent else (known,)
            if any(round(c, decimals) == value or c == value for c in candidates):
                return True
        return False


def _shell_text(text: str) -> bool:
    """Whether a code span or line is a shell command (not one of the bot's own slash commands)."""
    return bool(_SHELL_START.search(text)) or bool(_SHELL_IN_PROSE.search(text))


@dataclass(frozen=True)
class _Claim:
    """One claim of a sentence: "`x` (a kind)", and whether a text holds it (`given`: it holds without
    evidence, as one of the bot's own commands that parses)."""

    label: str
    holds: Callable[[_Lookup], bool]
    given: bool = False


def _claims(sentence: str, parses: Callable[[str], bool]) -> list[_Claim]:
    """Every claim of a sentence, each once, in the order of the kinds below."""
    claims: dict[str, _Claim] = {}

    def claim(label: str, kind: str, holds: Callable[[_Lookup], bool], given: bool = False) -> None:
        key = f"`{label}` ({kind})"
        if key not in claims:
            claims[key] = _Claim(key, holds, given)

    def text(value: str) -> Callable[[_Lookup], bool]:
        return lambda evidence: evidence.has(value)

    def number(raw: str, percent: bool = False, price: bool = False) -> Callable[[_Lookup], bool]:
        return lambda evidence: evidence.has_number(raw, percent=percent, price=price)

    def time(moment: str) -> Callable[[_Lookup], bool]:
        return lambda evidence: moment in evidence.times

    rest = sentence
    for url in _URL.findall(rest):
        claim(url.rstrip(".,;:"), "a URL", text(url.rstrip(".,;:")))
    rest = _URL.sub(" ", rest)
    for match in _BOT_COMMAND.finditer(rest):
        line = match.group(1).strip()
        # a path the facts give (`/health`, `/v1/models`) is not a command
        claim(line, "not a command of this bot", text(line.split()[0]), given=parses(line))
    lowered = rest.lower()  # zones, regions and names in any case
    for zone in _ZONE.findall(lowered):
        claim(zone, "a zone", text(zone))
    for region in _REGION.findall(_ZONE.sub(" ", lowered)):
        claim(region, "a region", text(region))
    for accelerator in _ACCELERATOR.findall(rest):
        claim(accelerator, "an accelerator type", text(accelerator))
    for version in _VERSION.findall(rest):
        claim(version, "a version", text(version.lstrip("v")))
    for date in _DATE.findall(rest):
        claim(date, "a date", text(date))
    for hour, minute in _TIME.findall(rest):
        claim(f"{hour}:{minute}", "a time", time(f"{int(hour):02d}:{minute}"))
    plain = _TIME.sub(" ", _DATE.sub(" ", _VERSION.sub(" ", rest)))
    for amount in _PRICE.findall(plain):
        claim(f"${amount}", "a price", number(amount, price=True))
    # Names (gemma4-qr-node-2, us-east5-a, v6e-8) are checked as names below, not as numbers.
    for amount, unit in _QUANTITY.findall(_NAME.sub(" ", _PRICE.sub(" ", plain))):
        quantity = f"{amount}{unit}" if not unit[0].isalpha() else f"{amount} {unit}"
        claim(quantity, "a number", number(amount, percent=unit == "%"))
    for code in _EXIT_CODE.findall(plain):
        claim(f"exit code {code}", "a number", number(code))
    named = {*_NAME.findall(_ZONE.sub(" ", lowered)), *_BACKTICKED.findall(lowered)}
    for name in sorted(named):
        if _ACCELERATOR.fullmatch(name) or _ZONE.fullmatch(name) or _REGION.fullmatch(name):
            continue
        if any(ch.isdigit() for ch in name) or f"`{name}`" in lowered:
            claim(name, "a name", text(name))
    return list(claims.values())


def _leading(line: str, scope: Scope) -> frozenset[str]:
    """The subjects a quoted line starts with ("`gemma4-qr`: *ACTIVE* ..." of a listing), empty when its
    first word names none (a log line starts with its time)."""
    first = _FIRST_WORD.search(line.lower())
    return scope.named(first.group(0)) if first else frozenset()


def _quoted(line: str) -> _Claim:
    """A line of a quoted block as a claim: the line itself, however the evidence wraps or indents it."""
    flat = " ".join(line.split())
    return _Claim(flat, lambda evidence: evidence.has(flat))


@dataclass(frozen=True)
class _Resting:
    """Where a sentence's (or a quoted block's) claims were found: the subjects of the evidence that holds
    only claims about other subjects than the sentence's (empty: none), and whether a claim is found only
    in evidence of earlier events."""

    foreign: frozenset[str]
    only_earlier: bool


def _resting(
    claims: Sequence[_Claim], runs: Sequence[tuple[Evidence, _Lookup]], about: frozenset[str], scope: Scope
) -> _Resting:
    """Where each claim (not given) is found among the runs of evidence (`llm.grounding.segments`).

    A claim rests on another subject when every run that holds it is about subjects none of which is the
    sentence's (`about`), and none is general. A claim no single run holds (a quote across two runs) is not
    judged."""
    foreign: set[str] = set()
    earlier = False
    for claim in claims:
        if claim.given:
            continue
        holders = [evidence for evidence, lookup in runs if claim.holds(lookup)]
        if not holders:
            continue
        earlier = earlier or not any(e.now for e in holders)
        if scope.asked and all(e.about and not (e.about & about) for e in holders):
            foreign |= {s for e in holders for s in e.about}
    return _Resting(frozenset(foreign), earlier)


_NOW_WORDS = linear(
    r"(?i)\b(?:still|again|resurfac\w*|recurr\w*|ongoing|persist\w*|keeps? (?:failing|happening)|"
    r"(?:is|are) (?:happening|occurring|failing|broken)|currently)\b"
)
_FAILURE_WORDS = linear(
    r"(?i)\b(?:problem|issue|error|fail\w*|broken|outage|limit\w*|denied|refused|401|403|429|oom|crash\w*)\b"
)
_NEGATION = linear(
    r"(?i)\b(?:not|no|never|none|nothing|isn't|aren't|wasn't|no longer|resolved|fixed)\b|n't\b"
)


_EARLIER_WHY = "it tells an earlier failure as current; the facts say it is not"


def _tells_as_current(sentence: str) -> bool:
    """Whether a sentence says a failure is happening now ("still", "again", "resurfaced", "ongoing", ...,
    with a failure word, not negated)."""
    return bool(
        _NOW_WORDS.search(sentence) and _FAILURE_WORDS.search(sentence) and not _NEGATION.search(sentence)
    )


def _sentences(text: str) -> list[str]:
    """`text` cut after sentence ends and line breaks, each piece stripped, empty ones dropped."""
    return [piece.strip() for piece in split_after(text, _SENTENCE_END) if piece.strip()]


def _shingles(text: str, size: int) -> set[tuple[str, ...]]:
    words = _normal(text).split()
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def _loops(sentence: str) -> bool:
    words = _normal(sentence).split()
    return len(words) > 12 and len(set(words)) < LOOP_UNIQUE_SHARE * len(words)


def _strip_template(text: str) -> tuple[str, bool]:
    """The answer before any turn marker (a leading marker and role word dropped), the thinking channel
    and other control tokens removed; and whether any template token was found."""
    found = False
    thought = _THINKING.sub("", text)
    found = thought != text
    body = thought.lstrip()
    while True:
        lead = _TURN.match(body)
        if lead is None:
            break
        found = True
        body = _ROLE_WORD.sub("", body[lead.end() :], count=1).lstrip()
    marker = _TURN.search(body)
    if marker is not None:
        found, body = True, body[: marker.start()]
    cleaned = _CONTROL.sub("", body)
    return cleaned, found or cleaned != body


def check_answer(
    text: str,
    evidence: str | Sequence[Evidence] | None,
    *,
    parses: Callable[[str], bool],
    prompt: str = "",
    states: Mapping[str, str] | None = None,
    unknown_names: Iterable[str] = (),
    cut: bool = False,
    only_earlier_failures: bool = False,
    scope: Scope | None = None,
    offered: Callable[[str], bool] | None = None,
) -> Checked:
    """Check a model's answer against what the bot read (see the module docstring).

    Args:
        text: the model's answer as the server returned it.
        evidence: everything the model was given as data, each text with what it is about
            (`llm.grounding.Evidence`): the facts (summaries and full texts), the tool results, the notes on
            the question's names, the question. A claim must appear in it. A plain string is one general
            text. None: the model was given no facts (a prompt passed through as typed): only template
            tokens, shell commands, echoes and loops are removed, and nothing is counted as checked.
        parses: whether a line such as "/tpu delete gemma4-old" is one of the bot's commands as typed
            (the registry's parser).
        prompt: the bot's instructions to the model (system prompt): a sentence repeating them is dropped.
        states: resource or node name -> its fetched state, for `llm.grounding.contradictions`.
        unknown_names: names the question used that resolve to nothing (a typo, a name that does not
            exist): a sentence that names one is removed even though the notes about it mention it.
        cut: the server stopped the answer at max_tokens (`finish_reason == "length"`).
        only_earlier_failures: the facts hold failures that are not the present state and none that is: a
            sentence telling a failure as happening now ("the token problem is still there", "it has
            resurfaced") is removed.
        scope: what the question is about and which subject each name stands for
            (`llm.grounding.Scope`); each sentence and quoted block must then rest on evidence about what
            it is about. None (or a scope that asks about nothing): no text is held to a subject.
        offered: whether the bot offers a command line of the answer that parses ("/tpu delete gemma4-qr
            --force now": its command part is read): a change the bot does not offer for the question's
            subject is removed, whatever data it was seen in. None: every command that parses is kept.

    Returns:
        Checked: the text to post ("" when withheld), what was removed and why, whether it was withheld.
    """
    removed: list[Removal] = []
    body, templated = _strip_template(canonical_text(text))
    if templated:
        removed.append(Removal("chat-template tokens (the text after them was an invented next turn)"))

    given = [Evidence(evidence)] if isinstance(evidence, str) else list(evidence or ())
    facts = _Lookup.of("\n".join(e.text for e in given))
    held = scope or Scope()
    runs = [(run, _Lookup.of(run.text)) for run in segments(given, held)]
    quoted: list[tuple[str, list[str]]] = []

    def check_fence(match: LinearMatch) -> str:
        """A fenced block: the bot's commands become code spans; a quote of the facts (every line found
        in them) is kept whole, aside from the sentence checks; anything else is removed."""
        lines = [line.strip() for line in match.group(1).splitlines() if line.strip()]
        if lines and all(line.startswith("/") and parses(line) for line in lines):
            return "\n".join(f"`{line}`" for line in lines) + "\n"
        if any(_shell_text(line) for line in lines):
            removed.append(Removal(_SHELL_WHY, match.group(1)))
            return "\n" + _GONE + "\n"
        if lines and (evidence is None or all(facts.has(" ".join(line.split())) for line in lines)):
            quoted.append(("```\n" + "\n".join(lines) + "\n```", lines))
            return "\n" + _QUOTED.format(len(quoted) - 1) + "\n"
        removed.append(Removal("a quoted block that is not in the facts", match.group(1)))
        return "\n" + _GONE + "\n"

    body = _FENCE.sub(check_fence, body)
    echo = _shingles(prompt, ECHO_WORDS) if prompt else set()
    unknown = {n.lower() for n in unknown_names if n}
    known_states = dict(states or {})
    kept: list[str] = []
    # per kept part: its claims, its quotes, and what it tells of (None: it names and claims nothing)
    counted: list[tuple[int, int, frozenset[str] | None]] = []

    def keep(part: str, claims: int = 0, quotes: int = 0, about: frozenset[str] | None = None) -> None:
        kept.append(part)
        counted.append((claims, quotes, about))

    def drop_introduction() -> None:
        """A sentence ending in ":" whose quote or block was removed goes too."""
        while kept and kept[-1].endswith(":"):
            kept.pop()
            counted.pop()

    seen: set[str] = set()
    unverified: list[str] = []
    refused: list[str] = []
    sentences = _sentences(body)
    if cut and sentences and not sentences[-1].endswith((".", "!", "?", ":", "\x00")):
        removed.append(Removal("an unfinished last sentence", sentences.pop()))
    before = ""  # the model's own sentence before a quote: what the quote is told about
    for sentence in sentences:
        if sentence == _GONE:
            drop_introduction()
            continue
        if sentence.startswith("\x00quoted "):
            block, lines = quoted[int(sentence.split()[1].rstrip("\x00"))]
            told = held.told_of(before) or held.asked  # what the sentence before the block says it is
            foreign = frozenset(
                subject
                for line in lines
                if evidence is not None
                for subject in _resting([_quoted(line)], runs, _leading(line, held) or told, held).foreign
            )
            about = told
            if foreign:
                removed.append(Removal(_told_as(held, foreign, about, "a quoted block about"), block))
                drop_introduction()
                continue
            keep(block, quotes=int(evidence is not None), about=told)
            continue
        normal = _normal(sentence)
        if not normal:
            continue
        # A line copied from the evidence (a log line, a listing line) is a quote: the names it carries say
        # where it came from, not what it is told about, unless it starts with one (a listing's line)
        line = " ".join(sentence.split()).rstrip(".")
        copied = evidence is not None and len(normal.split()) >= QUOTE_WORDS and facts.has(line)
        if not copied:
            before = sentence  # a sentence of the model's own: what a quote after it is told about
        if normal in seen or _loops(sentence):
            removed.append(Removal("repeated text", sentence))
            continue
        seen.add(normal)
        spans = _CODE_SPAN.findall(sentence)
        if any(_shell_text(span) for span in spans) or _shell_text(_CODE_SPAN.sub(" ", sentence)):
            removed.append(Removal(_SHELL_WHY, sentence))
            continue
        unoffered = _unoffered(_URL.sub(" ", sentence), parses, offered)
        if unoffered:
            refused += unoffered
            removed.append(Removal(_UNOFFERED_WHY, sentence))
            continue
        if echo and _shingles(sentence, ECHO_WORDS) & echo:
            removed.append(Removal("it repeats the bot's instructions to the model", sentence))
            continue
        words = {_POSSESSIVE.sub("", w.strip("`*_'\".,;:!?()")) for w in sentence.lower().split()}
        typo = sorted(unknown & {*words, *(n.lower() for n in _NAME.findall(sentence))})
        if typo:
            removed.append(Removal(f"`{typo[0]}` names nothing the bot knows", sentence))
            continue
        if evidence is None:
            keep(sentence)
            continue
        found = _claims(sentence, parses)
        missing = [c.label for c in found if not c.given and not c.holds(facts)]
        if missing:
            unverified += missing
            removed.append(Removal(f"{missing[0]} is not in the facts", sentence))
            continue
        named = (_leading(line, held) or held.told_of(before)) if copied else held.told_of(sentence)
        about = named or held.asked
        resting = _resting([*found, _quoted(line)] if copied else found, runs, about, held)
        if resting.foreign:
            removed.append(Removal(_told_as(held, resting.foreign, about, "facts about"), sentence))
            continue
        if (only_earlier_failures or resting.only_earlier) and _tells_as_current(sentence):
            removed.append(Removal(_EARLIER_WHY, sentence))
            continue
        denied = contradictions(sentence, known_states) if known_states else []
        if denied:
            removed.append(Removal(denied[0].removeprefix("the answer "), sentence))
            continue
        keep(sentence, len(found), about=(named or held.asked) if found or named else None)
    drop_introduction()  # what it introduced was removed
    result = _join(kept)
    tells = _Told.of(counted, held if evidence is not None else Scope())
    withheld = _withhold_reason(result, removed) or (
        f"it was about {tells.strayed}, not {held.label(held.asked)} the question asks about"
        if tells.strayed
        else ""
    )
    # only what is posted counts as checked: nothing of a withheld answer
    claims = sum(n for n, _, _ in counted)
    quotes = sum(q for _, q, _ in counted)
    held_to = held.label(held.asked) if held.asked and evidence is not None else ""
    return Checked(
        "" if withheld else result,
        tuple(removed),
        withheld,
        cut,
        0 if withheld else claims,
        tuple(unverified),
        quotes=0 if withheld else quotes,
        about=held_to,
        found_in=() if withheld else tells.found_in,
        unanswered="" if withheld else tells.unanswered,
        strayed=tells.strayed,
        unoffered=tuple(dict.fromkeys(refused)),
    )


@dataclass(frozen=True)
class _Told:
    """Whom the posted parts of an answer tell of, against what the question asks (see `Checked`)."""

    found_in: tuple[FoundIn, ...]
    unanswered: str
    strayed: str

    @classmethod
    def of(cls, counted: Sequence[tuple[int, int, frozenset[str] | None]], scope: Scope) -> _Told:
        """From each posted part's claims, quotes and subjects (None: it names and claims nothing, as "No
        model ran." or "It looks fine.", and tells of no one). A question asking about nothing known holds
        no part to a subject."""
        questions = scope.questions()
        told = [about for _, _, about in counted if about is not None]
        if not questions or not told:
            return cls((), "", "")
        groups: dict[tuple[str, bool], tuple[int, int]] = {}
        for claims, quotes, about in counted:
            if about is not None:
                key = (scope.label(about), scope.about_asked(about))
                n, q = groups.get(key, (0, 0))
                groups[key] = (n + claims, q + quotes)
        found_in = tuple(FoundIn(label, n, q, asked) for (label, asked), (n, q) in groups.items())
        answered = [question for question in questions if any(about & question for about in told)]
        if not answered:
            return cls(found_in, "", scope.label(frozenset().union(*told)))
        missing = [question for question in questions if question not in answered]
        return cls(found_in, scope.label(frozenset().union(*missing)) if missing else "", "")


_UNOFFERED_WHY = "a change the bot does not offer (only its diagnosis or the asker's request offers one)"


def _unoffered(
    sentence: str, parses: Callable[[str], bool], offered: Callable[[str], bool] | None
) -> list[str]:
    """The bot commands of a sentence that parse and that the bot does not offer (none without `offered`)."""
    if offered is None:
        return []
    lines = [match.group(1).strip() for match in _BOT_COMMAND.finditer(sentence)]
    return [line for line in lines if parses(line) and not offered(line)]


_TOLD_AS = " told as about "


def _told_as(scope: Scope, foreign: frozenset[str], about: frozenset[str], what: str) -> str:
    """Why text resting on other subjects' evidence was removed, e.g. "facts about `gemma4-qr` told as
    about `gemma4-old`" (the subjects are names the facts hold; the claims themselves are not repeated)."""
    return f"{what} {scope.label(foreign)}{_TOLD_AS}{scope.label(about)}"


def _join(sentences: list[str]) -> str:
    """Sentences back into text: list items and headings on their own lines, the rest as a paragraph."""
    out = ""
    for sentence in sentences:
        own_line = sentence.startswith(("-", "*", "•", "#", "```")) or sentence[:1].isdigit()
        sep = "" if not out else "\n" if own_line or out.endswith((":", "```")) else " "
        out += sep + sentence
    return out.strip()


def _withhold_reason(kept: str, removed: list[Removal]) -> str:
    """Why nothing of the answer is worth posting, "" when what is left is."""
    dropped = [r for r in removed if not r.why.startswith(("chat-template", "an unfinished"))]
    words = len(kept.split())
    if words < MIN_KEPT_WORDS:
        if not dropped:
            return "the model wrote nothing that could be checked"
        return f"nothing was left after the check ({_reasons(dropped)})"
    kept_sentences = len(_sentences(kept))
    echoed = sum(r.why.startswith("it repeats") for r in dropped)
    if echoed and echoed >= kept_sentences:
        return "the model mostly repeated the bot's instructions (its chat template may be wrong)"
    wrong = [r for r in dropped if r.why.endswith("is not in the facts") or "; it is " in r.why]
    if len(wrong) >= 2 and len(wrong) > kept_sentences:
        return f"most of it named things the facts do not hold ({_reasons(wrong)})"
    elsewhere = [r for r in dropped if _TOLD_AS in r.why]
    if elsewhere and len(wrong) + len(elsewhere) > kept_sentences:
        return f"most of it told facts about other subjects as the one asked about ({_reasons(elsewhere)})"
    return ""


def _reasons(removals: list[Removal]) -> str:
    reasons = list(dict.fromkeys(r.shown for r in removals))
    return "; ".join(reasons[:3]) + ("; …" if len(reasons) > 3 else "")
