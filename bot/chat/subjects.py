"""What a question is about, resolved against what the bot knows and never replaced by a guess, and where
its facts are read.

Names in the question resolve against the queued resources and nodes of the asking deployment (a node stands
for its queued resource), then of the other deployments, and against the deployment names. A word that looks
like a resource name but is none is said so: read as the one name it is a typo of ("`gemma4-odl` read as
`gemma4-old`"), else "no queued resource named X (there are A, B); did you mean C?". An unknown name never
falls back to the primary. When the question names nothing, the thread gives the subject (its newest message
naming exactly one known queued resource of any deployment the bot knows (by name, node, or the one name
a typo in it is read as): an alert, an earlier answer
about it, another deployment's alert in a shared alerts channel; else those of this deployment a message
names when each names several), else the channel's deployment (its primary).

"all", "every deployment" or "the fleet" asks about every deployment; a deployment's name ("how is staging
doing?") about that one.

What each fact and tool result is about (`scope_of`): a subject is a queued resource or a deployment
(`llm.grounding.Scope`), a node stands for its queued resource, a deployment for itself and every queued
resource it watches. The question's subjects are those `resolve` found: the queued resources it (or its
thread) names, the deployments it names with their queued resources, and, when it names nothing, the
channel's whole deployment.

The facts about vLLM, its container and the logs, and the tools called without a subject, are read where
the question points (`Aim`, `plan_call`): the subjects' own nodes in their own deployment ("why is staging's
vLLM slow?" reads staging's), never every node of the asking one. Pure logic: `bot.handlers.chat` lists the
names and fetches the facts.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from llm.grounding import Scope, canonical_text
from ops.linear import linear
from ops.tpu.model import Absent, is_region, is_zone

__all__ = [
    "BOT",
    "DEFAULT_WINDOW",
    "DESCRIBE_TOOL",
    "NODE_PARAM",
    "Aim",
    "Known",
    "Read",
    "Subjects",
    "ThreadMessage",
    "ToolPlan",
    "Unresolved",
    "aim_of",
    "home_of",
    "plan_call",
    "resolve",
    "scope_of",
    "word_set",
    "words_of",
]

# -- what a question names --------------------------------------------------------------------------------

DEFAULT_WINDOW = timedelta(hours=1)
BOT = "bot"
"""`ThreadMessage.author` of the bot's own messages (alerts, earlier answers)."""

READ_AS_RATIO = 0.8
"""difflib similarity (0..1) at or above which a word that is no name is read as the one name close to it."""
CLOSE_RATIO = 0.75
"""difflib similarity at or above which a name is offered as "did you mean"."""
TYPO_LENGTH = 2
"""A typo adds or drops at most this many characters."""
CLEARLY_BETTER = 0.1
"""How much more similar the best name must be than the next to be read as the word, or offered at all."""
LISTED_NAMES = 8

_WINDOW = linear(
    r"(?i)\b(?:last|past|since|previous|--since)\s+(?:(\d+)\s*)?"
    r"(m|min|mins|minutes?|h|hrs?|hours?|d|days?)\b"
)
_WINDOW_SHORT = linear(r"(?i)\b(\d+)\s*(m|min|h|d)\b")
_UNIT = {"m": "minutes", "h": "hours", "d": "days"}


def word_set(words: str) -> frozenset[str]:
    """The space-separated words of `words` (word lists kept readable)."""
    return frozenset(words.split())


# Words that point at a kind of fact beyond the resources themselves.
TOPIC_WORDS: dict[str, frozenset[str]] = {
    "logs": word_set(
        "log logs error errors fail failed failing failure crash crashed why oom memory hbm broken wrong "
        "exception down stuck hung hang problem problems issue issues happening happened gated download "
        "hugging huggingface hf 401 403 429 denied refused timeout killed exited restarted pull busy held"
    ),
    "serving": word_set(
        "vllm serving serve health healthy latency ttft tpot itl kv cache metrics throughput tokens model "
        "requests slow queue down endpoint up container starting stuck hung hang"
    ),
    "cost": word_set("cost costs price burn spend spending bill money dollars $"),
    # a question about the whole inventory ("list my TPUs", "which queued resources failed?")
    "inventory": word_set("list listing inventory all every which tpus resources nodes vms slices"),
}

# Cost questions by kind, not by a word list: any form of cost/spend/bill/burn/price/charge/pay/expense,
# money words, a currency sign or code, a rate per hour/day/month, "how much" unless it asks about another
# quantity (memory, KV cache, tokens, time...): then group 1 holds that quantity.
_COST = linear(
    r"(?i)\b(?:cost\w*|spen[dt]\w*|bill\w*|burn\w*|pric\w*|charg\w*|expens\w*|pay(?:s|ing|ment)?|paid|"
    r"money|dollars?|usd|eur|budget\w*|invoice\w*|rate card)\b|[$€£]|\bper (?:hour|hr|day|month)\b|"
    r"\bhow much\b( (?:memory|hbm|vram|ram|kv|cache|time|longer|context|capacity|quota|disk|space|load|"
    r"traffic|data|tokens?|latency|throughput|room|headroom)\b)?"
)


def _asks_cost(question: str) -> bool:
    return any(match.group(1) is None for match in _COST.finditer(question))


# The whole fleet: "the fleet", "everything", "all deployments", "every environment", "all of them",
# "which deployments are there?".
_FLEET = linear(
    r"(?i)\bfleet\b|\beverything\b|\bevery ?where\b|\ball of them\b|^\W*all\W*$|"
    r"\b(?:all|every|each|both)\b(?:\s+(?:the|our|of|my))*\s+(?:deployments?|environments?|envs?)\b|"
    r"\b(?:which|what|list|how many|show)\b(?:\s+\w+){0,3}?\s+(?:deployments|environments|envs)\b"
)
_DEPLOYMENT_WORDS = frozenset({"deployment", "deployments", "environment", "env"})
# Words that can stand before "deployment" without naming one ("the staging deployment" names staging).
_NOT_A_DEPLOYMENT = word_set(
    "the this that our my your a an each every all which what whole current same other new old any one "
    "primary tpu vllm gemma model whose its their"
)
_NAME = linear(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
_ACCELERATOR = linear(r"^(?:v\d+[a-z]*|v5litepod)(?:-\d+)?$")
_AMOUNT = linear(r"^\d+(?:[smhd]|ms|min|mins|gb|gib|k)?$")
_POSSESSIVE = linear(r"['’]s$")
_STRIP = "?!.,:;'\"()`*<>@[]{}"


def words_of(text: str) -> list[str]:
    """The words of `text` as it reads (`llm.grounding.canonical_text`: a non-breaking hyphen or a Cyrillic
    "о" hides no name), lowercased, without surrounding punctuation or a possessive "'s"."""
    words = []
    for raw in canonical_text(text).split():
        word = raw.strip(_STRIP).lower()
        word = _POSSESSIVE.sub("", word).strip(_STRIP)
        if word:
            words.append(word)
    return words


@dataclass(frozen=True)
class ThreadMessage:
    """An earlier message of the question's thread.

    Attributes:
        text: its text as last edited.
        author: BOT for the bot's own messages, else the Slack user id ("" when unknown).
    """

    text: str
    author: str = ""


@dataclass(frozen=True)
class Known:
    """The names a question may use.

    Attributes:
        resources: the asking deployment's queued resources -> their node ids.
        deployment: the asking deployment's name.
        primary: its primary queued resource (TPU_PRIMARY).
        others: every other deployment -> its queued resources -> their node ids.
        terms: words that name no resource although they look like one (the served model's name, e.g.
            "gemma-4-31b-it"; its hyphen-prefixes are terms too).
        gone: queued resources no longer listed that a command run here deleted (lowercased name -> what
            the audit trail says of it, `bot.chat.asks.deletions`): such a name is said to be gone, never
            read as a typo of another.
        absent: node ids among `resources` and `others` that the TPU API does not list now -> what became
            of each (never created, or deleted): a node never created has no logs to read.
    """

    resources: Mapping[str, Sequence[str]]
    deployment: str = ""
    primary: str = ""
    others: Mapping[str, Mapping[str, Sequence[str]]] = field(default_factory=dict)
    terms: Iterable[str] = ()
    gone: Mapping[str, str] = field(default_factory=dict)
    absent: Mapping[str, Absent] = field(default_factory=dict)

    @property
    def deployments(self) -> tuple[str, ...]:
        """Every deployment name, the asking one first."""
        return tuple(name for name in dict.fromkeys([self.deployment, *self.others]) if name)


@dataclass(frozen=True)
class Unresolved:
    """A name in the question that resolves to nothing the bot knows.

    Attributes:
        word: the word as read (lowercased).
        kind: "queued resource" or "deployment".
        close: known names close to it (did you mean), best first.
        known: every known name of that kind.
        where: the deployment searched ("" for a deployment name).
        gone: what the audit trail says of a queued resource a command run here deleted ("" otherwise).
    """

    word: str
    kind: str
    close: tuple[str, ...]
    known: tuple[str, ...]
    where: str = ""
    gone: str = ""

    def sentence(self) -> str:
        """E.g. "no queued resource named `gemma4-nope` in `production` (there are `gemma4-qr`, `gemma4-old`)"
        or "...; did you mean `gemma4-old`?"; for a deleted one, e.g. "`gemma4-qr` was deleted at 04:43
        UTC by <@U1> (`/tpu delete gemma4-qr --force`, from the audit trail): it is no longer listed in
        `production`"."""
        if self.gone:
            where = f" in `{self.where}`" if self.where else ""
            return f"{self.gone}: it is no longer listed{where}"
        shown = ", ".join(f"`{name}`" for name in self.known[:LISTED_NAMES])
        if len(self.known) > LISTED_NAMES:
            shown += f" and {len(self.known) - LISTED_NAMES} more"
        where = f" in `{self.where}`" if self.where else ""
        text = f"no {self.kind} named `{self.word}`{where}"
        text += f" (there are {shown})" if shown else f" (there are no {self.kind}s)"
        if self.close:
            text += "; did you mean " + " or ".join(f"`{name}`" for name in self.close) + "?"
        return text


@dataclass(frozen=True)
class Subjects:
    """What a question is about.

    Attributes:
        resources: the asking deployment's queued resources it is about, in the order named.
        origin: where they came from: "question", "thread" or "channel deployment" (the primary); "" when
            the question is about no resource of this deployment (an unknown name, another deployment).
        window: the time window for logs, e.g. 2 h for "in the last 2 hours"; DEFAULT_WINDOW otherwise.
        topics: kinds of facts asked for beyond the resources: "logs", "serving", "cost", "inventory"
            (every queued resource, not only the subjects).
        deployments: deployments asked about by name or as "all" (the asking one included when named).
        unresolved: names that resolve to nothing (each says what exists and what is close).
        read_as: a word that is no name -> the one queued resource it was read as (a typo), in `resources`.
        deployment_read_as: likewise for a deployment name before "deployment" ("stagng deployment").
        elsewhere: a queued resource of another deployment named in the question (or, origin "thread", in
            the thread) -> that deployment.
        thread_author: the author of the thread message the subject came from (origin "thread"; "" when it
            came from messages naming several, which no change may act on).
    """

    resources: tuple[str, ...]
    origin: str
    window: timedelta = DEFAULT_WINDOW
    topics: frozenset[str] = frozenset()
    deployments: tuple[str, ...] = ()
    unresolved: tuple[Unresolved, ...] = ()
    read_as: Mapping[str, str] = field(default_factory=dict)
    deployment_read_as: Mapping[str, str] = field(default_factory=dict)
    elsewhere: Mapping[str, str] = field(default_factory=dict)
    thread_author: str = ""

    def notes(self) -> list[str]:
        """One sentence per typo read as a name and per unresolved name, for the reply and the model."""
        notes = [
            f"`{word}` read as `{name}`: no queued resource is named `{word}`"
            for word, name in self.read_as.items()
        ]
        notes += [
            f"`{word}` read as deployment `{name}`: no deployment is named `{word}`"
            for word, name in self.deployment_read_as.items()
        ]
        notes += [item.sentence() for item in self.unresolved]
        notes += [
            f"`{name}` is a queued resource of deployment `{where}`" for name, where in self.elsewhere.items()
        ]
        return notes


def _window(text: str) -> timedelta | None:
    match = _WINDOW.search(text) or _WINDOW_SHORT.search(text)
    if match is None:
        return None
    amount = int(match.group(1) or 1)
    unit = _UNIT[match.group(2)[0].lower()]
    return timedelta(**{unit: amount}) if 0 < amount <= 10_000 else None


def _by_word(resources: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Every queued resource and node name (lowercased) -> its queued resource."""
    found: dict[str, str] = {}
    for name, nodes in resources.items():
        found[name.lower()] = name
        for node in nodes:
            found.setdefault(node.lower(), name)
    return found


def _term_words(terms: Iterable[str]) -> set[str]:
    """Each term lowercased, its hyphen-prefixes of two parts or more, and the forms without the last path
    part ("google/gemma-4-31B-it" -> "gemma-4-31b-it", "gemma-4-31b", "gemma-4", "gemma4")."""
    words: set[str] = set()
    for term in terms:
        name = term.lower().rsplit("/", 1)[-1]
        parts = name.split("-")
        for end in range(2, len(parts) + 1):
            words.add("-".join(parts[:end]))
        words.add(name.replace("-", "", 1))
    return words


def _looks_like_a_name(word: str, names: Sequence[str], excluded: set[str]) -> bool:
    """Whether `word` is written like a queued resource or node id that was meant as one: the id syntax,
    not a zone, region, accelerator type, amount or known term, not the start of a known name, and either
    with a hyphen and a digit (gemma4-nope) or close to a known name (a typo)."""
    if not _NAME.match(word) or word in excluded:
        return False
    if "-" not in word and not any(c.isdigit() for c in word):
        return False
    if is_zone(word) or is_region(word) or _ACCELERATOR.match(word) or _AMOUNT.match(word):
        return False
    if any(name.startswith(word + "-") for name in names):
        return False
    has_digit = any(c.isdigit() for c in word)
    return ("-" in word and has_digit) or bool(_close(word, {name: name for name in names})[0])


def _close(word: str, by_word: Mapping[str, str]) -> tuple[list[str], float]:
    """The queued resources whose name or node is close to `word` (of a length within TYPO_LENGTH, a ratio
    of at least CLOSE_RATIO, and within
    CLEARLY_BETTER of the best), best first, and the best ratio over the other resources' (0 if none)."""
    ratios: dict[str, float] = {}
    for name, qr in by_word.items():
        if abs(len(name) - len(word)) > TYPO_LENGTH:
            continue
        ratio = difflib.SequenceMatcher(None, word, name).ratio()
        ratios[qr] = max(ratios.get(qr, 0.0), ratio)
    ranked = sorted(ratios.items(), key=lambda item: -item[1])
    if not ranked or ranked[0][1] < CLOSE_RATIO:
        return [], 0.0
    best = ranked[0][1]
    close = [qr for qr, ratio in ranked if ratio >= max(CLOSE_RATIO, best - CLEARLY_BETTER)]
    margin = best - (ranked[1][1] if len(ranked) > 1 else 0.0)
    return close, best if margin >= CLEARLY_BETTER else 0.0


def _named_here(
    words: Sequence[str], here: Mapping[str, str], names: Sequence[str], excluded: set[str]
) -> list[str]:
    """The queued resources of the asking deployment `words` name, in order: by name or node, or by the
    one name a typo is read as (as the question's own words are, said in the bot's answer to it)."""
    found = []
    for word in words:
        if word in here:
            found.append(here[word])
        elif _looks_like_a_name(word, names, excluded):
            close, best = _close(word, here)
            if best >= READ_AS_RATIO:
                found.append(close[0])
    return found


def resolve(question: str, thread: Sequence[ThreadMessage], known: Known) -> Subjects:
    """Resolve what a question is about (see the module docstring).

    Args:
        question: the user's message.
        thread: the thread's earlier messages, oldest first.
        known: the names the bot knows.

    Returns:
        Subjects. Names are matched whole and case-insensitively.
    """
    words = words_of(question)
    here = _by_word(known.resources)
    there = {w: (d, qr) for d, resources in known.others.items() for w, qr in _by_word(resources).items()}
    deployments = {d.lower(): d for d in known.deployments}
    excluded = _term_words(known.terms) | set(deployments) | _DEPLOYMENT_WORDS
    found: list[str] = []
    named: list[str] = []
    unresolved: list[Unresolved] = []
    read_as: dict[str, str] = {}
    deployment_read_as: dict[str, str] = {}
    elsewhere: dict[str, str] = {}
    for index, word in enumerate(words):
        if word in here:
            found.append(here[word])
        elif word in there:
            deployment, name = there[word]
            elsewhere[name] = deployment
            named.append(deployment)
        elif word in deployments:
            named.append(deployments[word])
        elif word in _DEPLOYMENT_WORDS and index > 0:
            before = words[index - 1]
            if before not in deployments and before not in _NOT_A_DEPLOYMENT and _NAME.match(before):
                close = difflib.get_close_matches(before, list(deployments), 3, CLOSE_RATIO - 0.1)
                if len(close) == 1:
                    deployment_read_as[before] = deployments[close[0]]
                    named.append(deployments[close[0]])
                else:
                    known_names = tuple(deployments.values())
                    unresolved.append(Unresolved(before, "deployment", tuple(close), known_names))
        elif word in known.gone and all(u.word != word for u in unresolved):
            gone = known.gone[word]
            unresolved.append(Unresolved(word, "queued resource", (), (), known.deployment, gone))
        elif _looks_like_a_name(word, [*here, *there], excluded):
            close, best = _close(word, here)
            if best >= READ_AS_RATIO:
                read_as[word] = close[0]
                found.append(close[0])
            elif word not in read_as and all(u.word != word for u in unresolved):
                unresolved.append(
                    Unresolved(
                        word, "queued resource", tuple(close), tuple(known.resources), known.deployment
                    )
                )
    if _FLEET.search(question) and len(deployments) > 1:
        named = list(deployments.values())
    window = _window(question) or next(
        (w for w in (_window(m.text) for m in reversed(thread)) if w), DEFAULT_WINDOW
    )
    topics = frozenset(topic for topic, keys in TOPIC_WORDS.items() if keys & set(words)) | (
        {"cost"} if _asks_cost(question) else set()
    )
    base = Subjects(
        (),
        "",
        window,
        topics,
        deployments=tuple(dict.fromkeys(named)),
        unresolved=tuple(unresolved),
        read_as=read_as,
        deployment_read_as=deployment_read_as,
        elsewhere=elsewhere,
    )
    if found:
        return replace(base, resources=tuple(dict.fromkeys(found)), origin="question")
    if named or unresolved:  # about something else than this deployment's resources: nothing replaces it
        asked_here = known.deployment in named and known.primary in known.resources
        return replace(base, resources=(known.primary,), origin="question") if asked_here else base
    several: tuple[str, ...] = ()
    for message in reversed(thread):  # the newest message that names one queued resource gives it
        said = words_of(message.text)
        names = tuple(dict.fromkeys(_named_here(said, here, [*here, *there], excluded | set(there))))
        theirs = {there[w] for w in said if w in there}  # another deployment's (a shared alerts channel)
        if len(names) == 1:
            return replace(base, resources=names, origin="thread", thread_author=message.author)
        if len(theirs) == 1 and not names:
            [(deployment, name)] = theirs
            return replace(base, origin="thread", elsewhere={name: deployment}, thread_author=message.author)
        several = several or names
    if several:  # only messages naming several (an earlier answer listing them all): each of them
        return replace(base, resources=several, origin="thread", thread_author="")
    primary = (known.primary,) if known.primary in known.resources else ()
    return replace(base, resources=primary, origin="channel deployment")


# -- what each fact is about, and where the question points ----------------------------------------------

NODE_PARAM = "node"
"""The parameter through which a chat tool reads one TPU node (`/logs --node`); a tool's other subject
parameter names a queued resource (`/tpu describe NAME`)."""


def _listings(known: Known) -> dict[str, Mapping[str, Sequence[str]]]:
    """Every deployment -> its queued resources -> their node ids, the asking one first."""
    others = {name: resources for name, resources in known.others.items() if name != known.deployment}
    return {known.deployment: known.resources, **others}


def scope_of(known: Known, subjects: Subjects) -> Scope:
    """Which subject each known name stands for, and what the question is about.

    Args:
        known: the names the bot knows (every deployment's queued resources and nodes).
        subjects: what the question was resolved to be about.

    Returns:
        A Scope whose `asked` holds the question's queued resources (this deployment's and others'), the
        deployments it names with their queued resources, and, for a question that names nothing and takes
        the channel's deployment, that whole deployment; empty for a question about nothing known (an
        unknown name alone). A deployment named like a queued resource is the subject "NAME deployment":
        the name stands for the resource (a production queued resource `staging` takes none of deployment
        staging's facts).
    """
    names: dict[str, set[str]] = {}
    deployments: set[str] = set()
    listings = _listings(known)
    taken = {resource.lower() for resources in listings.values() for resource in resources}

    def key_of(deployment: str) -> str:
        """A deployment's subject: its name, unless a queued resource has that name (the name then stands
        for the resource, as `resolve` reads it, and the deployment is "NAME deployment")."""
        key = deployment.lower()
        return f"{key} deployment" if key in taken else key

    for deployment, resources in listings.items():
        if deployment:
            key = key_of(deployment)
            deployments.add(key)
            names.setdefault(key, set()).update({key, *(resource.lower() for resource in resources)})
        for resource, nodes in resources.items():
            names.setdefault(resource.lower(), set()).add(resource.lower())
            for node in nodes:
                names.setdefault(node.lower(), set()).add(resource.lower())
    frozen = {name: frozenset(subjects_) for name, subjects_ in names.items()}
    asked: set[str] = {name.lower() for name in (*subjects.resources, *subjects.elsewhere)}
    for deployment in subjects.deployments:
        asked |= frozen.get(key_of(deployment), frozenset({key_of(deployment)}))
    if subjects.origin == "channel deployment" and known.deployment:
        asked |= frozen.get(key_of(known.deployment), frozenset())
    return Scope(frozenset(asked), frozen, frozenset(deployments))


@dataclass(frozen=True)
class Aim:
    """Where the facts about vLLM, its container and the logs are read, and what the chat's tools read when
    the model names no subject.

    Attributes:
        deployment: the deployment they are read in: the asking one, else the one deployment the question
            is about (by the name of one of its queued resources, or by its own name).
        resources: the queued resources the question is about there (a deployment named alone: its
            primary); empty when it is about none of them.
        nodes: their node ids, in order; empty when they have none.
        serving: the queued resource whose node serves vLLM there (the deployment's primary), "" when it
            lists no such resource.
        every: every queued resource of that deployment.
        nodes_of: each of `resources` -> its node ids (`nodes` by resource; not compared).
        unborn: the nodes `resources` name that were never created (`Absent`), left out of `nodes`: no log
            of theirs exists.
    """

    deployment: str
    resources: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    serving: str = ""
    every: tuple[str, ...] = ()
    nodes_of: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    unborn: tuple[Absent, ...] = ()

    def each(self) -> tuple[Aim, ...]:
        """This aim once per queued resource it is about, each with its own nodes (a question naming two
        reads each one's logs as a fact about it alone); itself when it is about one or none."""
        if len(self.resources) < 2:
            return (self,)
        return tuple(
            replace(
                self,
                resources=(name,),
                nodes=self.nodes_of.get(name, ()),
                unborn=tuple(a for a in self.unborn if a.resource == name),
            )
            for name in self.resources
        )

    @property
    def about(self) -> tuple[str, ...]:
        """What a read of the subjects' nodes is about: their queued resources, else the deployment."""
        return self.resources or ((self.deployment,) if self.deployment else ())

    @property
    def serves_subject(self) -> bool:
        """Whether vLLM's node is a subject's, or the question is about no queued resource there (so the
        container's own failure is the present cause of what it asks)."""
        return not self.resources or self.serving in self.resources


def aim_of(known: Known, subjects: Subjects, primaries: Mapping[str, str]) -> Aim:
    """Where the question points (see `Aim`).

    Args:
        known: the names the bot knows.
        subjects: what the question was resolved to be about.
        primaries: each deployment -> its primary queued resource (TPU_PRIMARY).

    Returns:
        The Aim: the asking deployment when the question names any of its queued resources, or names no
        single other deployment.
    """
    listings = _listings(known)
    deployment, resources = known.deployment, tuple(subjects.resources)
    others = set(subjects.elsewhere.values())
    if not resources and len(others) == 1:
        deployment = others.pop()
        resources = tuple(name for name, where in subjects.elsewhere.items() if where == deployment)
    elif not resources and len(subjects.deployments) == 1:
        deployment = subjects.deployments[0]
        primary = primaries.get(deployment, "")
        resources = (primary,) if primary in listings.get(deployment, {}) else ()
    listing = listings.get(deployment, {})
    unborn = tuple(
        known.absent[node]
        for name in resources
        for node in listing.get(name, ())
        if node in known.absent and not known.absent[node].created
    )
    never = {a.node for a in unborn}
    nodes_of = {name: tuple(n for n in listing.get(name, ()) if n not in never) for name in resources}
    nodes = tuple(dict.fromkeys(node for name in resources for node in nodes_of[name]))
    primary = primaries.get(deployment, "")
    serving = primary if primary in listing else ""
    return Aim(deployment, resources, nodes, serving, tuple(listing), nodes_of, unborn)


def home_of(known: Known, name: str) -> tuple[str, str] | None:
    """The deployment and queued resource a queued resource or node name belongs to (the asking deployment
    first), None when no deployment lists it."""
    for deployment, resources in _listings(known).items():
        for resource, nodes in resources.items():
            if name == resource or name in nodes:
                return deployment, resource
    return None


@dataclass(frozen=True)
class Read:
    """One command a chat tool call runs.

    Attributes:
        arguments: the tool's arguments for it (JSON values by parameter name).
        deployment: the deployment it runs in.
        header: the line before its result that tells the model what the result is about.
        what: what it reads, in words, for the answer's footer: "the status of deployment `production`".
        tool: the chat tool whose command it runs when not the one called (`DESCRIBE_TOOL` for a node that
            was never created: its queued resource's own state and error); "" for the one called.
    """

    arguments: Mapping[str, Any]
    deployment: str
    header: str
    what: str
    tool: str = ""


@dataclass(frozen=True)
class ToolPlan:
    """How a chat tool call is answered: the commands it runs, in order, and what their results are about.
    `logged`: it reads log entries of nodes (the tool takes NODE_PARAM and a read runs it), so where each
    line was logged says what it is about (`llm.grounding.Evidence.logged`)."""

    reads: tuple[Read, ...]
    about: tuple[str, ...]
    logged: bool = False


def plan_call(
    tool: str,
    subject_params: Sequence[str],
    arguments: Mapping[str, Any],
    *,
    known: Known | None,
    scope: Scope,
    aim: Aim,
    serving: bool = False,
    reads: str = "",
) -> ToolPlan:
    """What one chat tool call reads.

    A call that names a subject (a value for one of `subject_params`) reads that one, in the deployment that
    lists it, labelled as not what the question is about when it is not. A call that names none reads what
    the question is about: a node parameter its nodes, one read each; another subject parameter its first
    queued resource; a tool without one the deployment the question points at (a `serving` tool, vLLM's:
    the resource it runs on). A node that was never created has no logs (`Absent`): in its place the call
    reads its queued resource's own state and error (`DESCRIBE_TOOL`), and so for a subject without a node,
    never another node's logs; the header says so in words. A node deleted since is read, its header saying
    that its entries are from before it was deleted.

    Args:
        tool: the tool's name, e.g. "logs".
        subject_params: its parameters that name a queued resource or node, e.g. ("node",).
        arguments: the model's arguments.
        known: the names the bot knows (None: a name resolves to no deployment, and runs in `aim`'s).
        scope: what the question is about.
        aim: where the question points.
        serving: the tool reads the deployment's vLLM server.
        reads: what the tool reads, in words ("the status", `bot.commands.registry.ChatTool.reads`), for
            each read's `Read.what`; "" for "the TOOL".

    Returns:
        The plan.
    """
    named = next(
        (str(arguments[p]).strip() for p in subject_params if str(arguments.get(p) or "").strip()), ""
    )
    noun = reads or f"the {tool}"
    plan = _plan(tool, noun, subject_params, arguments, named, known, scope, aim, serving)
    return replace(plan, logged=NODE_PARAM in subject_params and any(not r.tool for r in plan.reads))


DESCRIBE_TOOL = "describe"
"""The chat tool that reads one queued resource's own state and error (`/tpu describe NAME`)."""


def _instead(tool: str, resource: str, deployment: str, why: str, short: str) -> Read:
    """The read of `resource`'s own state and error in place of `tool` on nodes it does not have, its
    header saying why in words (`why`; `short` for the footer: "its node was never created")."""
    return Read(
        {"name": resource},
        deployment,
        f"[{DESCRIBE_TOOL} of `{resource}` in place of {tool}: {why}; what can answer is the queued "
        "resource's own state and error]",
        f"the state and error of `{resource}` ({short})",
        DESCRIBE_TOOL,
    )


def _plan(
    tool: str,
    noun: str,
    subject_params: Sequence[str],
    arguments: Mapping[str, Any],
    named: str,
    known: Known | None,
    scope: Scope,
    aim: Aim,
    serving: bool,
) -> ToolPlan:
    """`plan_call`'s plan, before it says whether the tool reads logs."""
    absent = known.absent if known is not None else {}
    if named:
        home = home_of(known, named) if known is not None else None
        deployment, resource = home if home is not None else (aim.deployment, named)
        asked = scope.about_asked(scope.expand([resource]))
        elsewhere = "" if asked else ", asked for by name: not what the question is about"
        gone = absent.get(named) if NODE_PARAM in subject_params else None
        if gone is not None and not gone.created:
            why = gone.sentence() + elsewhere
            return ToolPlan(
                (_instead(tool, resource, deployment, why, "its node was never created"),), (resource,)
            )
        deleted = f": {gone.sentence()}" if gone is not None else ""
        header = f"[{tool} of `{named}`{elsewhere}{deleted}]"
        on = "on" if NODE_PARAM in subject_params else "of"
        return ToolPlan((Read(arguments, deployment, header, f"{noun} {on} `{named}`"),), (resource,))
    if NODE_PARAM in subject_params and aim.resources:
        reads: list[Read] = []
        for resource, part in zip(aim.resources, aim.each(), strict=True):
            if not part.nodes:
                why = "; ".join(a.sentence() for a in part.unborn) or (
                    f"`{resource}` has no TPU node, so no {tool} of its own (another node's are not about it)"
                )
                short = "its node was never created" if part.unborn else "it has no TPU node"
                reads.append(_instead(tool, resource, aim.deployment, why, short))
                continue
            for node in part.nodes:
                gone = absent.get(node)
                deleted = f"; {gone.sentence()}" if gone is not None else ""
                header = f"[{tool} of node `{node}`: what the question is about{deleted}]"
                what = f"{noun} on node `{node}`" + (" (deleted since)" if gone is not None else "")
                reads.append(Read({**arguments, NODE_PARAM: node}, aim.deployment, header, what))
        return ToolPlan(tuple(reads), aim.resources)
    if subject_params and aim.resources:
        first = {**arguments, subject_params[0]: aim.resources[0]}
        header, what = f"[{tool} of `{aim.resources[0]}`]", f"{noun} of `{aim.resources[0]}`"
        return ToolPlan((Read(first, aim.deployment, header, what),), aim.resources[:1])
    on_serving = serving and bool(aim.serving)
    where = f"deployment `{aim.deployment}`" + (f", vLLM on `{aim.serving}`" if on_serving else "")
    about = (aim.serving,) if on_serving else (aim.deployment,)
    what = f"{noun} of deployment `{aim.deployment}`"
    return ToolPlan((Read(arguments, aim.deployment, f"[{tool} of {where}]", what),), about)
