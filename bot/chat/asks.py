"""What a question asks the bot to do, and what the bot did before it: the change the asker asked for and
the one command that makes it, instructions written in data (reported, never acted on), and the commands
run in the conversation and how each ended.

A change is suggested only when the asker's own words ask for it: a clause that starts (after "please",
"can you", "I want to", ...) with a change verb ("delete it", "clean it up", "tear down gemma4-old",
"restart vllm", "force delete it"). A question about a change ("why did the create fail?", "should I
delete it?") asks for none; nothing in logs, tool results or other people's messages ever makes one.

The command is built from the registry (its words and the switches it declares) and the subject: a name in
the question, or the thread's subject when the bot or the asker wrote it (an alert, an earlier answer), never
a guessed primary or a typo read as a name. It is only offered: its Review button runs the command's
preview, role check and Confirm step. Every asked word it does not carry is said: a switch the command does
not take, a second change, "all", a name that resolved to nothing.

Instructions hidden in data (`find_instructions`): text in log entries, tool results or other people's
messages that addresses the assistant instead of describing the system. The bot never acts on it and says
what it found and ignored. Kinds, as patterns (each linear: bounded repeats, no nested quantifiers):
- one of the bot's change commands written as a slash command (`/tpu delete ...`, `/vllm restart`), the
  words read from the registry;
- a marker that frames a directive, `WORD<<...>>` or `[[WORD ...]]` (e.g. "SUGGEST<</tpu delete x>>");
- chat-template or tool-call tokens (`<|tool_call>`, `<|im_start|>`, `<start_of_turn>`) and the name of
  the suggestion tool;
- phrases addressed to a model: "ignore the previous instructions", "you must call / run / suggest ...".

The commands run before (`outcomes`), read back from the audit trail: the runner writes every step of a
command there (`bot.commands.runner.Runner._audit`): "command" (received), "refuse" (role or input),
"confirm-requested", "confirm", "cancel", "result" ("ok" or "error: ..."). Grouped by run, the last step is
the outcome: a follow-up question ("why did the create fail?") gets the failure as a fact, with its time
(`relevant`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.chat.subjects import BOT, TOPIC_WORDS, Subjects, word_set, words_of
from bot.commands.registry import Registry, UsageError
from llm.grounding import Fact
from ops.linear import LinearPattern, linear
from ops.store.state import AuditEntry
from ops.tpu.model import is_zone

__all__ = [
    "DIRECTIVES",
    "Ask",
    "Found",
    "Outcome",
    "Suggestion",
    "asks_nothing",
    "command_line",
    "find_instructions",
    "offer",
    "offers",
    "outcomes",
    "patterns",
    "planted",
    "read_ask",
    "relevant",
    "suggest",
]

# -- a mention that asks nothing ---------------------------------------------------------------------------

CHATTER_WORDS = 4
"""A mention of more words than this is read as a question, whatever its words."""
# Words that ask something of the bot: what a question starts with, what it asks to see, the command groups.
_ASKING = word_set(
    "why what when where who whom whose how which did does do was were is are am has have had should shall "
    "can could would will if any anything tell show explain list check help status state details describe "
    "info information summary summarize report tpu tpus vm vms gemma fleet alerts alert deployment quota "
    "capacity zone zones region find ensure work works working worked"
)

_EMOJI_CODE = linear(r":[a-z0-9_+-]{1,40}:")
"""A Slack emoji code (":+1:", ":tada:"): no word of a question."""


def asks_nothing(question: str, names: Iterable[str] = ()) -> bool:
    """Whether a mention asks nothing the facts could answer ("ok", "thanks", "click", "cool 👍"), so the bot
    answers with what it can be asked instead of reading every source: no question mark, at most
    CHATTER_WORDS words besides emoji, none of which asks (a question word, a command group, "status", a
    change verb, a word of a kind of fact: `bot.chat.subjects.TOPIC_WORDS`) or names something (a word with
    a digit or a hyphen, as ids are written, or one of `names`: the deployments, the primary).

    Args:
        question: the mention's text, as typed.
        names: names the bot knows without reading anything (deployment names, TPU_PRIMARY).

    Returns:
        True when it asks nothing.
    """
    if "?" in question:
        return False
    words = words_of(_EMOJI_CODE.sub(" ", question))
    if len(words) > CHATTER_WORDS:
        return False
    known = {name.lower() for name in names}
    asking = _ASKING | set(_VERBS) | {w for pair in _PHRASES for w in pair} | _FORCE | known
    asking |= {w for keys in TOPIC_WORDS.values() for w in keys}
    return not any(w in asking or any(c.isdigit() or c == "-" for c in w) for w in words)


# -- the change asked for ---------------------------------------------------------------------------------

# Change verbs by the command family they ask for (the bot's change commands: /tpu delete, reset, recover,
# start, stop, create and /vllm start, stop, restart).
_VERBS: dict[str, str] = {
    **dict.fromkeys(
        word_set("delete remove destroy drop nuke purge wipe erase release cleanup clean"), "delete"
    ),
    **dict.fromkeys(word_set("reset reprovision re-provision"), "reset"),
    **dict.fromkeys(word_set("recover recreate re-create revive rebuild repair"), "recover"),
    **dict.fromkeys(word_set("stop halt shutdown pause kill"), "stop"),
    **dict.fromkeys(word_set("start boot resume"), "start"),
    **dict.fromkeys(word_set("restart reboot bounce"), "restart"),
    **dict.fromkeys(word_set("create provision launch"), "create"),
}
# Two-word forms: "tear down", "shut down", "bring up", "bring back", "spin up", "get rid (of)".
_PHRASES: dict[tuple[str, str], str] = {
    ("tear", "down"): "delete",
    ("get", "rid"): "delete",
    ("shut", "down"): "stop",
    ("bring", "up"): "start",
    ("bring", "back"): "recover",
    ("spin", "up"): "create",
}
# Words before the verb that keep a clause a request: politeness, "can you", "I want to", "let's".
_LEAD = word_set(
    "please pls plz kindly ok okay so now just then also hey go ahead and yes sure alright quickly right "
    "can could would will you we i i'd id want wanna to need let's lets let us gemma gemma-bot bot"
)
_FORCE = frozenset({"force", "forced", "forcefully", "forcibly", "--force"})
_VLLM_WORDS = word_set("vllm container server serving model engine docker")
_BULK = word_set("all every everything them both each")
_CLAUSES = linear(r"(?i)[.!?;:\n]+|,|\b(?:and then|and also|and|then|also|after that)\b")
# A clause that starts with one of these asks about something ("should I delete it?" asks for advice).
_QUESTION_WORDS = word_set(
    "why what when where who whom whose how did does do was were is are has had should shall if"
)
_NEW_NAME = linear(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")  # a queued resource id (the TPU API's rule)
_NOT_A_NAME = word_set(
    "a an the new one another queued resource tpu named called qr node in on with for it me us"
)
# Verbs that act on the vLLM container when no queued resource is named.
_CONTAINER_VERBS = frozenset({"start", "stop", "restart"})


@dataclass(frozen=True)
class Ask:
    """A change the asker asked for.

    Attributes:
        verb: the command family: "delete", "reset", "recover", "stop", "start", "restart" or "create".
        clause: the words that asked for it.
        vllm: the clause names the vLLM container (server, engine, model...).
        force: "force" or `--force` was asked.
        zone: a zone named in the message, or None.
        switches: the `--flags` typed in the message (without values), `--force` included.
        bulk: the word asking for many at once ("all", "them"), or "".
        others: further changes asked in the same message, each as its clause.
        objects: the clause's words after the verb (a new queued resource's name is among them).
    """

    verb: str
    clause: str
    vllm: bool = False
    force: bool = False
    zone: str | None = None
    switches: tuple[str, ...] = ()
    bulk: str = ""
    others: tuple[str, ...] = ()
    objects: tuple[str, ...] = ()


@dataclass(frozen=True)
class Suggestion:
    """The command offered for an ask, or why none is.

    Attributes:
        command: the command line (without the slash), parsed by the registry; None when none is offered.
        not_acted: the asked words the command does not carry, each with why, e.g. "`--force`: `/tpu reset`
            takes no --force".
        missing: why no command is offered (e.g. "which queued resource? ..."), "" when one is.
    """

    command: str | None
    not_acted: tuple[str, ...] = ()
    missing: str = ""


def _verb_of(words: Sequence[str]) -> tuple[str, int] | None:
    """The change verb a clause starts with after its lead words, and the index after it; None if none."""
    index = 0
    while index < len(words) and (words[index] in _LEAD or words[index] in _FORCE):
        index += 1
    if index < len(words) - 1 and (words[index], words[index + 1]) in _PHRASES:
        return _PHRASES[(words[index], words[index + 1])], index + 2
    if index < len(words) and words[index] in _VERBS:
        return _VERBS[words[index]], index + 1
    return None


def read_ask(question: str) -> Ask | None:
    """The change the question asks for, or None (a question about something, even about a change).

    Examples: "please clean it up" -> delete; "force delete gemma4-old" -> delete with force; "restart
    vllm and delete gemma4-old" -> restart of the vLLM container, "delete gemma4-old" among `others`;
    "why did the create fail?" -> None; "what happens if I delete it?" -> None.
    """
    words = words_of(question)
    asks: list[tuple[str, list[str], int]] = []
    for part in _CLAUSES.split(question):
        clause_words = words_of(part)
        if not clause_words or clause_words[0] in _QUESTION_WORDS:
            continue
        found = _verb_of(clause_words)
        if found is not None:
            asks.append((found[0], clause_words, found[1]))
    if not asks:
        return None
    verb, clause, after = asks[0]
    switches = tuple(dict.fromkeys(w for w in words if w.startswith("--") and len(w) > 2))
    return Ask(
        verb=verb,
        clause=" ".join(clause),
        vllm=bool(_VLLM_WORDS & set(clause)),
        force=bool(_FORCE & set(words)),
        zone=next((w for w in words if is_zone(w)), None),
        switches=switches,
        bulk=next((w for w in clause if w in _BULK), ""),
        others=tuple(" ".join(c) for _, c, _ in asks[1:]),
        objects=tuple(clause[after:]),
    )


def _targets(subjects: Subjects, asker: str) -> tuple[str, ...]:
    """The queued resources an ask may act on: named exactly in the question, or the thread's subject when
    the bot or the asker wrote it. Never the channel's primary by default, never a typo read as a name."""
    if subjects.origin == "question":
        return tuple(name for name in subjects.resources if name not in subjects.read_as.values())
    if subjects.origin == "thread" and subjects.thread_author in (BOT, asker):
        return subjects.resources
    return ()


def _which(subjects: Subjects, names: Sequence[str]) -> str:
    """Why no queued resource can be acted on: what did not resolve, else which to name."""
    if subjects.read_as:
        typed = ", ".join(f"`{word}`" for word in subjects.read_as)
        meant = " or ".join(f"`{name}`" for name in dict.fromkeys(subjects.read_as.values()))
        return f"no queued resource is named {typed} (did you mean {meant}?): ask again with the exact name"
    if subjects.unresolved:
        return "; ".join(u.sentence() for u in subjects.unresolved)
    listed = ", ".join(f"`{name}`" for name in names) or "none"
    return f"which queued resource? name it (there are {listed})"


def suggest(
    ask: Ask,
    subjects: Subjects,
    nodes: Mapping[str, Sequence[str]],
    registry: Registry,
    *,
    asker: str,
) -> Suggestion:
    """The one command that makes the asked change, built from the registry, or why there is none.

    Args:
        ask: what was asked (`read_ask`).
        subjects: what the question is about (`bot.chat.subjects.resolve`).
        nodes: the asking deployment's queued resources -> their node ids (start and stop act on a node).
        registry: the command registry (the command's words and switches come from it).
        asker: the Slack user who asked (the thread's subject counts when they or the bot wrote it).

    Returns:
        Suggestion.
    """
    not_acted = [f"“{other}”: one change at a time; ask for it next" for other in ask.others]
    if ask.bulk:
        not_acted.append(f"“{ask.bulk}”: one resource at a time")
    targets = _targets(subjects, asker)
    if ask.verb in _CONTAINER_VERBS and (ask.vllm or (ask.verb == "restart" and not targets)):
        line = f"vllm {ask.verb}"
    elif ask.verb == "create":
        new = [u.word for u in subjects.unresolved if u.kind == "queued resource"]
        new += [
            w
            for w in ask.objects
            if _NEW_NAME.match(w) and w not in _NOT_A_NAME | set(nodes) and not is_zone(w)
        ]
        if not new:
            taken = f" (`{targets[0]}` exists)" if targets else ""
            return Suggestion(None, tuple(not_acted), f"name the new queued resource{taken}")
        line = f"tpu create {new[0]}"
    elif not targets:
        return Suggestion(None, tuple(not_acted), _which(subjects, list(nodes)))
    elif ask.verb == "restart":
        return Suggestion(None, tuple(not_acted), "restart acts on the vLLM container: say “restart vllm”")
    else:
        target = targets[0]
        not_acted += [f"`{name}`: one resource at a time" for name in targets[1:]]
        if ask.verb in ("start", "stop"):
            node_ids = list(nodes.get(target, ()))
            if not node_ids:
                return Suggestion(None, tuple(not_acted), f"`{target}` has no node to {ask.verb}")
            not_acted += [f"node `{node}`: one node at a time" for node in node_ids[1:]]
            target = node_ids[0]
        line = f"tpu {ask.verb} {target}"
    return _with_options(line, ask, registry, not_acted)


def offer(
    question: str,
    subjects: Subjects,
    nodes: Mapping[str, Sequence[str]],
    registry: Registry,
    *,
    asker: str,
    proposed: str | None,
) -> tuple[Suggestion | None, str]:
    """The change to offer (only when the asker asked for one: `read_ask`, `suggest`) and a note on a
    command the model proposed (its suggestion tool) that is not offered ("" when none).

    Args:
        question: the asker's message.
        subjects, nodes, registry, asker: as `suggest` takes them.
        proposed: the command line the model proposed, None when it proposed none.

    Returns:
        (the Suggestion, None when no change was asked for; the note).
    """
    ask = read_ask(question)
    offered = suggest(ask, subjects, nodes, registry, asker=asker) if ask else None
    if not proposed or (offered is not None and offered.command and f"/{offered.command}" == proposed):
        return offered, ""
    why = "the question asks for no change" if ask is None else "it is not the change asked for"
    return offered, f"the model proposed `{proposed}`; not offered: {why}"


def _with_options(line: str, ask: Ask, registry: Registry, not_acted: list[str]) -> Suggestion:
    """`line` with the asked switches and zone the command declares; the others are said not acted on."""
    try:
        command = registry.parse(line).command
    except UsageError as exc:
        return Suggestion(None, tuple(not_acted), exc.problem or f"`/{line}` does not parse")
    declared = {p.flag: p for p in command.params if p.flag}
    asked = list(ask.switches)
    if ask.force and "--force" not in asked:
        asked.append("--force")
    for flag in asked:
        param = declared.get(flag)
        if param is not None and param.switch:
            line += f" {flag}"
        elif flag != "--zone":
            not_acted.append(f"`{flag}`: `/{command.name}` takes no {flag} here")
    if ask.zone:
        if "--zone" in declared:
            line += f" --zone {ask.zone}"
        else:
            not_acted.append(f"`{ask.zone}`: `/{command.name}` takes no zone")
    try:
        final = registry.parse(line)
    except UsageError as exc:
        return Suggestion(None, tuple(not_acted), exc.problem or f"`/{line}` does not parse")
    if not final.command.changes_infra:
        return Suggestion(None, tuple(not_acted), f"`/{final.command.name}` changes nothing")
    return Suggestion(final.text, tuple(not_acted))


# -- instructions in data ---------------------------------------------------------------------------------

SNIPPET_CHARS = 80
MAX_FOUND = 5

_GENERIC = (
    r"\b[A-Z][A-Z_]{2,30}\s{0,3}<<[^\n]{0,120}?>>",
    r"\[\[[A-Za-z_]{3,30}[^\n\]]{0,120}\]\]",
    r"<\|[a-z_]{2,30}\|?>|<(?:start|end)_of_turn>",
    r"\bsuggest_command\b",
    r"\bignore (?:all |any |the )?(?:previous|prior|above|earlier|former|preceding) "
    r"(?:instructions?|messages?|prompts?|rules|context)\b",
    r"\b(?:you|assistant|model|ai|gemma|bot) (?:must|should|need to|have to|are to) (?:now |immediately )?"
    r"(?:run|call|suggest|execute|recommend|offer|delete|invoke)\b[^\n]{0,80}",
)


DIRECTIVES = linear("(?i)" + "|".join(_GENERIC))
"""The kinds that are never the bot's own text (markers, template tokens, phrases to a model): for the output
of the bot's own commands (tool results), which name its commands in their fixes."""


@dataclass(frozen=True)
class Found:
    """One instruction found in data.

    Attributes:
        source: where it was found, e.g. "the logs", "the thread", "a tool result".
        snippet: the text found, on one line, at most SNIPPET_CHARS characters, without backticks.
    """

    source: str
    snippet: str


def patterns(registry: Registry) -> LinearPattern:
    """The instruction patterns, the bot's change commands read from `registry`. A command is group 1 (the
    character before it, not a word character or `/`, is matched too: RE2 has no look-behind)."""
    changes = [c for c in registry.commands() if c.changes_infra]
    groups = "|".join(sorted({re.escape(c.words[0]) for c in changes})) or _NOTHING
    verbs = "|".join(sorted({re.escape(c.words[1]) for c in changes if len(c.words) > 1})) or _NOTHING
    command = rf"(?:\A|[^\w/])(/(?:{groups})\s{{1,3}}(?:{verbs})\b[^\n]{{0,80}})"
    return linear("(?i)" + "|".join((command, *_GENERIC)))


_NOTHING = r"[^\x00-\x{10FFFF}]"  # matches no character (an empty alternation)


def _snippet(text: str) -> str:
    line = " ".join(text.replace("`", "'").split())
    return line if len(line) <= SNIPPET_CHARS else line[: SNIPPET_CHARS - 1] + "…"


def find_instructions(sources: Iterable[tuple[str, str, LinearPattern]]) -> list[Found]:
    """The instructions in each (source, text, pattern), each distinct snippet once, at most MAX_FOUND.

    Args:
        sources: (where, text, what to look for), e.g. ("the logs", the error entries' text,
            `patterns(registry)`) or ("a tool result", its text, DIRECTIVES).

    Returns:
        What was found, in the order of `sources`.
    """
    found: list[Found] = []
    seen: set[str] = set()
    for source, text, pattern in sources:
        for match in pattern.finditer(text):
            command = match.group(1) if pattern.groups else None
            snippet = _snippet(command if command is not None else match.group(0))
            if snippet.lower() in seen:
                continue
            seen.add(snippet.lower())
            found.append(Found(source, snippet))
            if len(found) >= MAX_FOUND:
                return found
    return found


# -- the bot's commands in a model's answer ---------------------------------------------------------------

COMMAND_WORDS = 6
"""At most this many words of a line are read as a command (`Registry.starts_with_command` reads as many)."""
_COMMAND_END = linear(r"[`()\"';,]|[.:!?](?:\s|$)")
"""Where a command written in prose ends: a quote, a bracket, a comma or the end of its sentence."""


def command_line(registry: Registry, text: str) -> str | None:
    """The bot command `text` starts with, as the registry writes it ("/tpu delete gemma4-qr --force" of
    "/tpu delete gemma4-qr --force now"): its longest start of at most COMMAND_WORDS words that parses as
    a command (not a group alone), with its slash; None when it starts with none."""
    stop = _COMMAND_END.search(text)
    text = text[: stop.start()] if stop is not None else text
    if not registry.starts_with_command(text):
        return None
    tokens = text.split()[:COMMAND_WORDS]
    for end in range(len(tokens), 0, -1):
        try:
            invocation = registry.parse(" ".join(tokens[:end]))
        except (UsageError, ValueError):
            continue
        return "/" + invocation.text.lstrip("/")
    return None


def _changes(registry: Registry, line: str) -> bool:
    try:
        return registry.parse(line).command.changes_infra
    except (UsageError, ValueError):
        return False


def offers(registry: Registry, offered: Iterable[str]) -> Callable[[str], bool]:
    """Whether the bot offers a command line a model wrote (`llm.claims.check_answer`'s `offered`).

    A command that changes nothing (/tpu describe, /logs) is the bot's help and always offered. A change is
    offered only when the bot itself offers it for the question's subject: the fix of its diagnosis (the
    catalogue's text), the change the asker asked for (`suggest`), given in `offered` as text holding the
    commands ("recover it (/tpu recover gemma4-old --search)"). The model's line may leave off the
    offered line's trailing switches ("/tpu recover gemma4-old"), never change a word of it. A command
    seen in logs, tool results or other people's messages is never offered because it was seen there.

    Args:
        registry: the command registry.
        offered: texts of the bot's own offers, each holding zero or more of its commands.

    Returns:
        A predicate over command lines ("/tpu delete gemma4-qr --force now": its command part is read).
    """
    found = patterns(registry)
    lines = [
        line.split()
        for text in offered
        for match in found.finditer(text)
        if match.group(1) is not None
        for line in [command_line(registry, match.group(1))]
        if line is not None
    ]

    def offered_line(text: str) -> bool:
        line = command_line(registry, text)
        if line is None or not _changes(registry, line):
            return True
        words = line.split()
        return any(words == given[: len(words)] for given in lines)

    return offered_line


def planted(registry: Registry, refused: Iterable[str], sources: Iterable[tuple[str, str]]) -> list[Found]:
    """Where the changes a model wrote and the bot did not offer (`refused`, command lines) were written
    in data: each is an instruction found there, reported and ignored (the model copied it).

    Args:
        registry: the command registry.
        refused: the command lines the check removed (`llm.claims.Checked.unoffered`).
        sources: (where, text) of the data the model was given: "the logs", "a tool result", "the thread".

    Returns:
        One Found per command and source, in the order of `sources`, at most MAX_FOUND.
    """
    wanted = {line for line in (command_line(registry, r) for r in refused) if line is not None}
    if not wanted:
        return []
    found: list[Found] = []
    for source, text in sources:
        for match in patterns(registry).finditer(text):
            line = command_line(registry, match.group(1)) if match.group(1) is not None else None
            if line in wanted and all(f.snippet != _snippet(line) for f in found):
                found.append(Found(source, _snippet(line)))
    return found[:MAX_FOUND]


# -- the commands run before ------------------------------------------------------------------------------

# Runs not worth reading back: the questions themselves (the thread holds them) and ratings.
_SKIPPED = ("gemma chat", "gemma rate", "help")
FAILED_STATES = ("failed", "refused")


@dataclass(frozen=True)
class Outcome:
    """One command run and how it ended.

    Attributes:
        command: the command line as typed (without the slash).
        user_id: who ran it.
        at: when it was received (UTC).
        state: "failed", "refused", "succeeded", "awaiting confirmation", "confirmed", "cancelled" or
            "no outcome recorded" (still running, or the bot stopped).
        detail: the error or refusal message, "" otherwise.
        ended_at: when the last step was written (UTC).
    """

    command: str
    user_id: str
    at: datetime
    state: str
    detail: str
    ended_at: datetime

    @property
    def failed(self) -> bool:
        return self.state in FAILED_STATES

    def line(self) -> str:
        """E.g. "`/tpu create newx` by <@U1> at 05:12 UTC: failed: the primary `gemma4-qr` is already
        ACTIVE"."""
        command = self.command.replace("`", "'")
        text = f"`/{command}` by <@{self.user_id}> at {self.at:%H:%M} UTC: {self.state}"
        return text + (f": {self.detail}" if self.detail else "")


def _state(entry: AuditEntry) -> tuple[str, str]:
    outcome = entry.outcome
    if entry.action == "refuse":
        return "refused", outcome
    if entry.action == "result":
        if outcome == "ok":
            return "succeeded", ""
        return "failed", outcome.removeprefix("error: ")
    if entry.action == "confirm-requested":
        return "awaiting confirmation", ""
    if entry.action == "confirm":
        return "confirmed", ""
    if entry.action == "cancel":
        return "cancelled", outcome
    return "no outcome recorded", ""


def outcomes(entries: Sequence[AuditEntry]) -> list[Outcome]:
    """Audit lines (oldest first) grouped into runs, newest run first; questions and ratings left out.

    A "command" line starts a run; each later line with the same command text is a step of the newest run
    of that text (a Confirm click arrives as "confirm" then "result").
    """
    runs: list[Outcome] = []
    latest: dict[str, int] = {}
    for entry in entries:
        if entry.command.startswith(_SKIPPED):
            continue
        state, detail = _state(entry)
        if entry.action == "command" or entry.command not in latest:
            latest[entry.command] = len(runs)
            runs.append(Outcome(entry.command, entry.user_id, entry.at, state, detail, entry.at))
            continue
        index = latest[entry.command]
        run = runs[index]
        runs[index] = Outcome(run.command, run.user_id, run.at, state, detail, entry.at)
    return list(reversed(runs))


# Words by which a question points back at something just done ("why did that fail?").
_BACK = frozenset({"that", "it", "this", "last", "just", "previous", "command", "earlier"})
_FAILURE = frozenset({"fail", "failed", "failure", "error", "refused", "wrong", "happened", "denied", "why"})


def deletions(runs: Sequence[Outcome]) -> dict[str, str]:
    """The queued resources a succeeded `/tpu delete` of `runs` (newest first) deleted, lowercased name ->
    e.g. "`gemma4-qr` was deleted at 04:43 UTC by <@U1> (`/tpu delete gemma4-qr --force`, from the audit
    trail)"; the newest deletion of a name wins. The caller keeps only names no longer listed (a name made
    again since is the new resource)."""
    deleted: dict[str, str] = {}
    for run in runs:
        words = run.command.split()
        if run.state != "succeeded" or words[:2] != ["tpu", "delete"] or len(words) < 3:
            continue
        command = run.command.replace("`", "'")
        deleted.setdefault(
            words[2].lower(),
            f"`{words[2]}` was deleted at {run.ended_at:%H:%M} UTC by <@{run.user_id}> (`/{command}`, from "
            "the audit trail)",
        )
    return deleted


def recent_fact(
    runs: Sequence[Outcome] | None, question: str, now: datetime
) -> tuple[Fact | None, list[Outcome]]:
    """The commands run here (`runs`, newest first; None when the audit trail could not be read) as an
    earlier fact, the ones the question may be about first, and those runs (shown with the answer); no fact
    when nothing was run."""
    if runs is None:
        return Fact("commands run here", "could not read the audit trail", at=now), []
    if not runs:
        return None, []
    asked = relevant(runs, question)
    first = asked + [run for run in runs if run not in asked]
    fact = Fact(
        "commands run here, the one asked about first, else newest first",
        "; ".join(run.line() for run in first[:5]),
        "\n".join(run.line() for run in runs),
        at=first[0].ended_at,
        now=False,
    )
    return fact, asked


def relevant(runs: Sequence[Outcome], question: str, limit: int = 2) -> list[Outcome]:
    """The runs (newest first) a question is about: those whose command it names by a command word
    ("why did the create fail?" -> `/tpu create ...`), else, when it points back at a failure ("why did
    that fail?"), the newest failed run; at most `limit`. [] when it is about none."""
    asked = set(words_of(question))
    named = [run for run in runs if asked & set(run.command.split()[1:2])]
    if named:
        return sorted(named, key=lambda run: not run.failed)[:limit]
    if asked & _BACK and asked & _FAILURE:
        return [run for run in runs if run.failed][:1]
    return []
