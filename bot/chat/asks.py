"""Whether the asker asked for a change, and the one command that makes it.

A change is suggested only when the asker's own words ask for it: a clause that starts (after "please",
"can you", "I want to", ...) with a change verb ("delete it", "clean it up", "tear down gemma4-old",
"restart vllm", "force delete it"). A question about a change ("why did the create fail?", "should I
delete it?") asks for none; nothing in logs, tool results or other people's messages ever makes one.

The command is built from the registry (its words and the switches it declares) and the subject: a name in
the question, or the thread's subject when the bot or the asker wrote it (an alert, an earlier answer), never
a guessed primary or a typo read as a name. It is only offered: its Review button runs the command's
preview, role check and Confirm step. Every asked word it does not carry is said: a switch the command does
not take, a second change, "all", a name that resolved to nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.chat.subjects import BOT, Subjects, word_set, words_of
from bot.commands.registry import Registry, UsageError
from ops.linear import linear
from ops.tpu.model import is_zone

__all__ = ["Ask", "Suggestion", "read_ask", "suggest"]


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
