"""The command registry, parser and help.

Each command is declared once, with the `command` decorator: its words (`tpu list`), typed parameters, the
role it needs, whether it changes infrastructure and, for a read-only command, whether the chat model may
call it as a tool (`ChatTool`; its JSON schema is built from the parameters). Slash commands, @mentions, the
console, `help`, the chat tools and the app manifest all read this registry. Parsing never raises anything
but `UsageError`, whose message is the command's usage line (or the group's command list) plus what was
wrong.
"""

from __future__ import annotations

import difflib
import html
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import IntEnum
from typing import Any

from ops.errors import BadInput
from ops.linear import LinearPattern, linear
from ops.times import DURATION_PATTERN, parse_duration
from ops.tpu.model import ZONE_EXAMPLE, ZONE_PATTERN, is_zone


class Role(IntEnum):
    """Access levels; each includes the ones below it."""

    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3


ECHO_LIMIT = 200
MAX_INPUT_CHARS = 4000


def echo(text: str) -> str:
    """User input repeated back to Slack: cut to ECHO_LIMIT characters and with `&`, `<`, `>` escaped, so it
    can never become a mention, `<!channel>` or a link (https://docs.slack.dev/messaging/formatting-message-text)."""
    if len(text) > ECHO_LIMIT:
        text = text[: ECHO_LIMIT - 1] + "…"
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class UsageError(Exception):
    """Input that does not parse. `str()` is what the user sees: what was wrong, then the usage.

    The problem usually quotes the user's words: it is passed through `echo` here, once.
    """

    def __init__(self, problem: str, usage: str) -> None:
        problem = echo(problem)
        super().__init__(f"{problem}\n{usage}" if problem else usage)
        self.problem = problem
        self.usage = usage


class NotACommand(UsageError):
    """The words do not read as a command line: the first word is no command group, the second is no
    command of the group and close to none, or words follow that the command does not take. In a mention,
    that is a question for Gemma, not a typo; a typo of a command ("tpu lst", "--zon") stays a UsageError."""


# ---- argument types: each takes the raw word and returns the value or raises ValueError(reason) ----

_NAME = linear(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_DURATION = linear(DURATION_PATTERN)


def resource_name(word: str) -> str:
    """A queued resource or node id: lowercase letters, digits and hyphens, starting with a letter, at most
    63 characters (the TPU API's resource id rule, https://cloud.google.com/tpu/docs/queued-resources)."""
    if not _NAME.match(word):
        # Names are case-sensitive (docs/usage.md) and never upper case: the lowercase word is offered
        lower = f": did you mean `{word.lower()}`?" if _NAME.match(word.lower()) else ""
        raise ValueError(f"{word!r} is not a TPU resource name (lowercase letters, digits, hyphens){lower}")
    return word


def zone_name(word: str) -> str:
    """A Google Cloud zone such as us-east5-a."""
    if not is_zone(word):
        raise ValueError(f"{word!r} is not a zone (e.g. {ZONE_EXAMPLE})")
    return word


_MODEL = linear(r"^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$")
_ACCELERATOR = linear(r"^(v\d+[a-z]*|v5litepod)-\d+$")


def model_id(word: str) -> str:
    """A Hugging Face model id, owner/name (e.g. google/gemma-4-31B-it)."""
    if not _MODEL.match(word):
        raise ValueError(f"{word!r} is not a model id (e.g. google/gemma-4-31B-it)")
    return word


# TPU software versions as the API names them: v2-alpha-tpuv6e, tpu-ubuntu2204-base, tpu-vm-tf-2.16.1-pjrt
# (https://cloud.google.com/tpu/docs/runtimes).
_RUNTIME = linear(r"^[a-z0-9][a-z0-9.-]{0,62}$")


def runtime_version(word: str) -> str:
    """A TPU runtime (software) version such as v2-alpha-tpuv6e: lowercase letters, digits, dots, hyphens."""
    if not _RUNTIME.match(word):
        raise ValueError(f"{word!r} is not a TPU runtime version (e.g. v2-alpha-tpuv6e)")
    return word


def accelerator_type(word: str) -> str:
    """A TPU accelerator type such as v6e-8, v5litepod-4 or v5p-8 (its shape; the API checks the rest)."""
    if not _ACCELERATOR.match(word):
        raise ValueError(f"{word!r} is not an accelerator type (e.g. v6e-8)")
    return word


@dataclass(frozen=True)
class IntRange:
    """An argument type: a whole number from `low` to `high` (call it with the word)."""

    low: int
    high: int

    def __call__(self, word: str) -> int:
        # ASCII digits only ("²" is a digit to str.isdigit), and few enough to convert at once.
        whole = word.isascii() and word.isdigit() and len(word) <= 18
        if not whole or not self.low <= int(word) <= self.high:
            raise ValueError(f"{word!r} is not a whole number from {self.low} to {self.high}")
        return int(word)

    def json_schema(self) -> dict[str, Any]:
        return {"type": "integer", "minimum": self.low, "maximum": self.high}


def int_range(low: int, high: int) -> IntRange:
    """An argument type: a whole number from `low` to `high`."""
    return IntRange(low, high)


@dataclass(frozen=True)
class OneOf:
    """An argument type: one of `choices`, case-insensitive; the value is the choice as declared."""

    choices: tuple[str, ...]

    def __call__(self, word: str) -> str:
        for choice in self.choices:
            if word.lower() == choice.lower():
                return choice
        raise ValueError(f"{word!r} is not one of {', '.join(self.choices)}")

    def json_schema(self) -> dict[str, Any]:
        return {"type": "string", "enum": list(self.choices)}


def one_of(*choices: str) -> OneOf:
    """An argument type: one of `choices` (e.g. `one_of("ERROR", "WARNING")`), case-insensitive."""
    return OneOf(choices)


def duration(word: str) -> timedelta:
    """An argument type: a duration such as 30s, 10m, 4h or 2d (`ops.times.parse_duration`).

    Raises:
        ValueError: not a number and a unit, or longer than MAX_DURATION (365d).
    """
    return parse_duration(word)


def window(word: str) -> timedelta:
    """A look-back window such as 10m or 4h: a `duration` above zero ("0m" or "-5m" is refused, never read
    as the default)."""
    if word.startswith("-") and _DURATION.match(word[1:]):
        raise ValueError(f"{word!r} is a negative window: give how far back to look, e.g. 10m or 2h")
    span = duration(word)
    if span <= timedelta(0):
        raise ValueError(f"{word!r} is an empty window: give how far back to look, e.g. 10m or 2h")
    return span


def timestamp(word: str) -> datetime:
    """An RFC 3339 UTC time such as 2026-11-30T21:04:05Z (as alerts show a resource's create time)."""
    try:
        moment = datetime.fromisoformat(word.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{word!r} is not a time (e.g. 2026-11-30T21:04:05Z)") from None
    if moment.tzinfo is None:
        raise ValueError(f"{word!r} has no time zone (end it with Z for UTC)")
    if not _EARLIEST <= moment <= _LATEST:  # also keeps the UTC conversion and date arithmetic in range
        raise ValueError(f"{word!r} is out of range ({_EARLIEST.year} to {_LATEST.year})")
    return moment.astimezone(UTC)


_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST = datetime(2999, 12, 31, tzinfo=UTC)


def _pattern(regex: LinearPattern) -> dict[str, Any]:
    return {"type": "string", "pattern": regex.pattern}


# The JSON schema (https://json-schema.org/understanding-json-schema/reference) of each argument type above;
# a type with a `json_schema()` method (IntRange, OneOf) gives its own, any other is a plain string.
_KIND_SCHEMAS: dict[Callable[[str], Any], dict[str, Any]] = {
    int: {"type": "integer"},
    resource_name: _pattern(_NAME),
    zone_name: {"type": "string", "pattern": f"^{ZONE_PATTERN}$"},
    model_id: _pattern(_MODEL),
    runtime_version: _pattern(_RUNTIME),
    accelerator_type: _pattern(_ACCELERATOR),
    duration: {**_pattern(_DURATION), "examples": ["30m", "2h", "1d"]},
    window: {**_pattern(_DURATION), "examples": ["30m", "2h", "1d"], "description": "above zero"},
    timestamp: {"type": "string", "format": "date-time"},
}


# ---- declarations ----


def _flag_of(name: str) -> str:
    """The option flag of an argument name: "--" + the name without a trailing "_" (kept only to avoid a
    Python keyword or builtin), "_" written "-"."""
    return "--" + name.rstrip("_").replace("_", "-")


@dataclass(frozen=True)
class Param:
    """One argument of a command.

    `flag` is "--zone" for an option, None for a positional. A `switch` takes no value (True when given).
    `kind` converts the raw word (raising ValueError or ops.errors.BadInput with a reason). A `rest`
    positional takes all the remaining words joined by spaces (for prompts).
    """

    name: str
    help: str
    flag: str | None = None
    kind: Callable[[str], Any] = str
    default: Any = None
    required: bool = False
    switch: bool = False
    metavar: str = "X"
    rest: bool = False

    @classmethod
    def option(cls, name: str, help: str, kind: Callable[[str], Any], metavar: str, **more: Any) -> Param:
        """An option that takes a value, its flag named after the argument: "type_" is `--type`, "last_seen"
        `--last-seen`. `kind` and `more` (default, required) are as for the class; returns the Param."""
        return cls(name, help, flag=_flag_of(name), kind=kind, metavar=metavar, **more)

    @classmethod
    def toggle(cls, name: str, help: str) -> Param:
        """A switch (no value; True when given), its flag named after the argument as for `option`."""
        return cls(name, help, flag=_flag_of(name), switch=True)

    def usage(self) -> str:
        if self.flag is None:
            text = self.metavar + ("..." if self.rest else "")
        elif self.switch:
            text = self.flag
        else:
            text = f"{self.flag} {self.metavar}"
        return text if self.required else f"[{text}]"

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of this argument's value, with `help` as its description: boolean for a switch,
        else from `kind` (integer with its range, string with its choices or pattern, ...)."""
        if self.switch:
            schema: dict[str, Any] = {"type": "boolean"}
        else:
            own = getattr(self.kind, "json_schema", None)
            schema = dict(own() if callable(own) else _KIND_SCHEMAS.get(self.kind, {"type": "string"}))
        schema["description"] = self.help
        return schema


# The arguments several commands take, declared once so that each reads and is documented the same way.
QUEUED_RESOURCE = Param("name", "queued resource name", kind=resource_name, required=True, metavar="NAME")
"""The queued resource a command acts on (`tpu describe`, `tpu create`, `tpu delete`, `tpu reset`)."""
SEARCHED_ZONE = Param.option("zone", "zone (default: search TPU_ZONES)", zone_name, "Z")
"""Where the queued resource or node named is; without it every watched zone is searched for it."""
ACCELERATOR_TYPE = Param.option(
    "type_", "accelerator type (default TPU_ACCELERATOR_TYPE)", accelerator_type, "T"
)
"""The accelerator type to create, search capacity for or price (`tpu create`, `tpu find`, `tpu cost`)."""

_TOOL_NAME = linear(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True)
class ChatTool:
    """Declares a read-only command as a tool the chat model may call (`Registry.command(chat_tool=...)`).

    Attributes:
        name: the function name the model sees, e.g. "describe" ([a-zA-Z0-9_-], at most 64 characters, as
            OpenAI function names; https://platform.openai.com/docs/api-reference/chat/create).
        description: what the tool returns, for the model.
        params: names of the command's parameters the model may set; their schema comes from the Params.
        preset: arguments given on every call, as typed words by parameter name, e.g. {"severity": "ERROR"}.
        reads: what a call reads, in words, for the chat answer's footer, before what it reads it of: "the
            status" (of deployment `production`); "" for its name.
    """

    name: str
    description: str
    params: tuple[str, ...] = ()
    preset: dict[str, str] = field(default_factory=dict)
    reads: str = ""


@dataclass(frozen=True)
class Command:
    """A declared command. `func(ctx, **params)` returns a `bot.slack.render.Reply`."""

    words: tuple[str, ...]
    summary: str
    params: tuple[Param, ...]
    role: Role
    changes_infra: bool
    func: Callable[..., Any]
    exclusive: tuple[tuple[str, ...], ...] = ()
    preview: Callable[..., Any] | None = None
    opens_form: bool = False
    chat_tool: ChatTool | None = None
    writes: bool = False
    asks_model: bool = False

    @property
    def name(self) -> str:
        return " ".join(self.words)

    @property
    def read_only(self) -> bool:
        """Whether the command only reads: the viewer role, no infrastructure change, no form, nothing
        written or posted on the user's behalf."""
        return self.role == Role.VIEWER and not (self.changes_infra or self.opens_form or self.writes)

    def tool_parameters(self) -> dict[str, Any]:
        """The JSON schema of the chat tool's arguments (an OpenAI function's `parameters`): one property
        per parameter the tool exposes, `required` as declared. {} properties for a tool without any.

        Raises:
            ValueError: the command is no chat tool.
        """
        if self.chat_tool is None:
            raise ValueError(f"`{self.name}` is no chat tool")
        exposed = [p for p in self.params if p.name in self.chat_tool.params]
        schema: dict[str, Any] = {"type": "object", "properties": {p.name: p.json_schema() for p in exposed}}
        required = [p.name for p in exposed if p.required]
        if required:
            schema["required"] = required
        return schema

    def tool_line(self, arguments: dict[str, Any]) -> str:
        """The command line a chat tool call stands for, to be parsed (and so validated) like typed input:
        the command's words, the tool's preset arguments, then the model's `arguments` (JSON values; a
        switch is given when true, None and "" are left out).

        Raises:
            ValueError: the command is no chat tool, or an argument is not one the tool exposes.
        """
        tool = self.chat_tool
        if tool is None:
            raise ValueError(f"`{self.name}` is no chat tool")
        unknown = sorted(set(arguments) - set(tool.params))
        if unknown:
            raise ValueError(
                f"unknown argument {', '.join(unknown)}; {self.name} takes {', '.join(tool.params) or 'none'}"
            )
        given = {**tool.preset, **{k: v for k, v in arguments.items() if v is not None and v != ""}}
        words = list(self.words)
        for param in self.params:
            if param.name not in given:
                continue
            value = given[param.name]
            if param.flag is None:
                words.append(shlex.quote(str(value)))
            elif not param.switch:
                words += [param.flag, shlex.quote(str(value))]
            elif value is True or str(value).lower() == "true":
                words.append(param.flag)
        return " ".join(words)

    def usage(self) -> str:
        """The usage line, e.g. "/tpu list [--zone Z | --all-zones]"; an exclusive group is shown where its
        first member is declared. `help` is no slash command and gets no slash."""
        by_name = {p.name: p for p in self.params}
        group_of = {name: group for group in self.exclusive for name in group}
        parts: list[str] = []
        for param in self.params:
            group = group_of.get(param.name)
            if group is None:
                parts.append(param.usage())
            elif group[0] == param.name:
                parts.append("[" + " | ".join(by_name[n].usage().strip("[]") for n in group) + "]")
        first = "help" if self.words == ("help",) else f"/{self.words[0]}"
        return " ".join([first, *self.words[1:], *parts])


@dataclass(frozen=True)
class Invocation:
    """A parsed command line: the command, its converted arguments, and the words as typed (normalized,
    quoted so that parsing `text` again gives the same invocation)."""

    command: Command
    args: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    deployment: str | None = None


_HELP_WORDS = ("help", "-h", "--help")
_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'"})
_MENTION = linear(r"<@[A-Z0-9]+(\|[^>]*)?>")
_INVISIBLE = linear("[\u200b\u200c\u200d\u2060\ufeff]")
_DASHES = linear(r"(^|\s)[—–]+")


def normalize(text: str) -> str:
    """Undo what Slack does to typed text: HTML escapes, smart quotes, and the em dash that autocorrect
    makes of "--"; drop user mentions (`<@U123>`) so "@bot tpu list" reads as "tpu list"."""
    text = html.unescape(_MENTION.sub(" ", text)).translate(_QUOTES)
    text = _INVISIBLE.sub("", text)
    return _DASHES.sub(r"\1--", text).strip()


class Registry:
    """All commands, keyed by their words."""

    def __init__(self) -> None:
        self._commands: dict[tuple[str, ...], Command] = {}

    def command(
        self,
        words: str,
        summary: str,
        *params: Param,
        role: Role = Role.VIEWER,
        changes_infra: bool = False,
        exclusive: tuple[tuple[str, ...], ...] = (),
        preview: Callable[..., Any] | None = None,
        opens_form: bool = False,
        chat_tool: ChatTool | None = None,
        writes: bool = False,
        asks_model: bool = False,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator declaring a command, e.g. `@registry.command("tpu list", "List ...", Param(...))`.

        A command that `changes_infra` runs only after a Confirm click; `preview(ctx, **args)` returns the
        Reply that shows exactly what it will do (without it, the confirmation shows the command line).
        A command that `opens_form` opens a modal, and runs in the listener (a trigger_id lasts 3 s).
        A command that `writes` records or posts something on the user's behalf (a rating, a test alert)
        without changing infrastructure: it is not read-only. A read-only command with a `chat_tool` is
        also a tool of the chat model (see `ChatTool`). A command that `asks_model` waits for the LLM (tens
        of seconds): it runs on the runner's model pool, within a per-user limit (see `bot.commands.runner`).

        Raises:
            ValueError: the words are declared twice, or the chat tool is invalid (the command is not
                read-only, its name is taken or malformed, it names a parameter the command does not have).
        """

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            key = tuple(words.split())
            if key in self._commands:
                raise ValueError(f"command {words!r} declared twice")
            command = Command(
                key,
                summary,
                params,
                role,
                changes_infra,
                func,
                exclusive,
                preview,
                opens_form,
                chat_tool,
                writes,
                asks_model,
            )
            if chat_tool is not None:
                self._check_tool(command, chat_tool)
            self._commands[key] = command
            return func

        return register

    def commands(self, group: str | None = None) -> list[Command]:
        """Declared commands in declaration order, optionally only those of one group ("tpu")."""
        return [c for c in self._commands.values() if group is None or c.words[0] == group]

    def tools(self) -> list[tuple[ChatTool, Command]]:
        """The tools the chat model may call and their commands, in declaration order."""
        return [(c.chat_tool, c) for c in self._commands.values() if c.chat_tool is not None]

    def _check_tool(self, command: Command, tool: ChatTool) -> None:
        """Raise ValueError unless `tool` may be declared on `command` (see `command`)."""
        if not command.read_only:
            raise ValueError(f"`{command.name}` is not read-only: it cannot be a chat tool")
        if not _TOOL_NAME.match(tool.name):
            raise ValueError(f"chat tool name {tool.name!r} is not [a-zA-Z0-9_-], 1 to 64 characters")
        taken = next((c.name for t, c in self.tools() if t.name == tool.name), None)
        if taken:
            raise ValueError(f"chat tool {tool.name!r} is already `{taken}`")
        declared = {p.name for p in command.params}
        missing = sorted((set(tool.params) | set(tool.preset)) - declared)
        if missing:
            raise ValueError(
                f"chat tool {tool.name!r}: `{command.name}` has no parameter {', '.join(missing)}"
            )

    def groups(self) -> list[str]:
        """Top-level words, i.e. the slash commands ("tpu", "vllm", ...), in declaration order."""
        return list(dict.fromkeys(c.words[0] for c in self._commands.values() if c.words[0] != "help"))

    def group_usage(self, group: str) -> str:
        lines = [f"`/{group}` commands:"]
        lines += [f"• `{c.usage()}`: {c.summary}" for c in self.commands(group)]
        return "\n".join(lines)

    def parse(self, text: str) -> Invocation:
        """Parse command words and arguments, e.g. "tpu list --zone us-east5-a".

        Returns:
            The Invocation. Empty text, "help" or "GROUP" alone, and "... --help" give the `help` command.

        Raises:
            UsageError: unknown command or option, missing or malformed argument, unbalanced quotes.
        """
        if len(text) > MAX_INPUT_CHARS:
            raise UsageError(f"that is too long ({len(text):,} characters; at most {MAX_INPUT_CHARS:,})", "")
        try:
            tokens = shlex.split(normalize(text))
        except ValueError as exc:
            raise UsageError(f"could not read that: {exc}", self._general_usage()) from None
        if tokens and tokens[0].startswith("/"):
            tokens[0] = tokens[0][1:]
        tokens = _fold_case(tokens, self._words)
        typed = shlex.join(tokens)
        tokens, deployment = _take_deployment(tokens, self._general_usage())
        if not tokens or tokens[0] in _HELP_WORDS:
            topic = " ".join(word.lstrip("/") for word in tokens[1:]) or None
            return replace(self._help(topic), deployment=deployment)
        command = self._match(tokens)
        if command is None:
            if tokens[0] not in self.groups():
                hint = _did_you_mean(tokens[0], [f"/{g}" for g in self.groups()], *self.groups())
                raise NotACommand(f"unknown command `{tokens[0]}`{hint}", self._general_usage())
            if len(tokens) == 1 or tokens[1] in _HELP_WORDS:
                return self._help(" ".join([tokens[0], *tokens[2:3]]))
            commands = [c for c in self.commands(tokens[0]) if len(c.words) > 1]
            close = _closest(tokens[1], [c.words[1] for c in commands])
            if not close:
                raise NotACommand(f"unknown command `{tokens[0]} {tokens[1]}`", self.group_usage(tokens[0]))
            # A typo is shown the usage of what it may have meant, not the whole group's.
            meant = [c for word in close for c in commands if c.words[1] == word]
            hint = "; did you mean " + " or ".join(dict.fromkeys(f"`/{tokens[0]} {w}`" for w in close)) + "?"
            usage = "\n".join(
                [*(f"• `{c.usage()}`: {c.summary}" for c in meant), self._help_pointer(tokens[0])]
            )
            raise UsageError(f"unknown command `{tokens[0]} {tokens[1]}`{hint}", usage)
        rest = tokens[len(command.words) :]
        if any(word in _HELP_WORDS for word in rest):
            return replace(self._help(command.name), deployment=deployment)
        return Invocation(command, _parse_args(command, rest), typed, deployment)

    def starts_with_command(self, line: str) -> bool:
        """Whether `line` ("/tpu describe gemma4-old", perhaps with prose after it, as a model writes it)
        starts with one of this bot's commands as it would be typed: `parse` accepts the command words and
        the arguments up to some word (at most 6 words are read), and they name a command, not a group
        alone ("/tpu nuke" is not one)."""
        tokens = line.split()[:6]
        for end in range(len(tokens), 0, -1):
            try:
                invocation = self.parse(" ".join(tokens[:end]))
            except (UsageError, ValueError):
                continue
            if invocation.command.name == "help" and end < len(tokens) and tokens[0].lstrip("/") != "help":
                return False  # only the group parsed: the next word is no command of it
            return end >= len(invocation.command.words)
        return False

    @property
    def _words(self) -> set[str]:
        """Every word of every command name, and the help words: what `_fold_case` may lowercase."""
        return {word for key in self._commands for word in key} | set(_HELP_WORDS)

    def _help(self, topic: str | None) -> Invocation:
        help_command = self._commands.get(("help",))
        if help_command is None:
            raise UsageError("", self._general_usage())
        return Invocation(
            help_command, {"topic": topic}, "help" + (f" {shlex.quote(topic)}" if topic else "")
        )

    def _match(self, tokens: list[str]) -> Command | None:
        for length in range(min(len(tokens), 3), 0, -1):
            command = self._commands.get(tuple(tokens[:length]))
            if command is not None:
                return command
        return None

    def _help_pointer(self, group: str) -> str:
        return f"`/{group} help` lists every `/{group}` command."

    def _general_usage(self) -> str:
        groups = ", ".join(f"`/{g}`" for g in self.groups())
        return f"Commands: {groups}. Type `/tpu help` or `@gemma-bot help` for the list."


def _fold_case(tokens: list[str], command_words: set[str]) -> list[str]:
    """Command words and option names are case-insensitive (`/TPU LIST --ZONE us-east5-a`); arguments keep
    their case (model ids such as google/gemma-4-31B-it are case-sensitive). Leading tokens that are
    command words in another case are lowercased, as is the name part of every `--option`."""
    folded = list(tokens)
    for index, token in enumerate(folded[:3]):
        if token.lower() not in command_words:
            break
        folded[index] = token.lower()
    for index, token in enumerate(folded):
        if token.startswith("--") and len(token) > 2:
            flag, eq, value = token.partition("=")
            folded[index] = flag.lower() + eq + value
    return folded


def _closest(typed: str, names: list[str]) -> list[str]:
    """The (at most 3) distinct `names` closest to what was typed, by difflib's ratio of at least 0.6."""
    return difflib.get_close_matches(typed.lower(), list(dict.fromkeys(names)), n=3, cutoff=0.6)


def _did_you_mean(typed: str, shown: list[str], *names: str) -> str:
    """ "; did you mean `/tpu list`?" for the known names closest to what was typed (`_closest`), or ""
    when none is close. `shown[i]` is how `names[i]` (default: `shown[i]`) is displayed."""
    keys = list(names) if names else shown
    close = _closest(typed, keys)
    if not close:
        return ""
    return "; did you mean " + " or ".join(f"`{shown[keys.index(name)]}`" for name in close) + "?"


_DEPLOYMENT = linear(r"^[a-z][a-z0-9-]{0,30}$")
DEPLOYMENT_FLAG = "--deployment"


def _take_deployment(words: list[str], usage: str) -> tuple[list[str], str | None]:
    """Remove `--deployment NAME` (or `--deployment=NAME`), which every command accepts (bot.deployments),
    from the words. Returns the other words and NAME, or None when it is not given.

    Raises:
        UsageError: the flag is given twice, without a value, or with a malformed name (`usage` appended).
    """
    rest: list[str] = []
    name: str | None = None
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        flag, has_value, value = word.partition("=")
        if flag != DEPLOYMENT_FLAG:
            rest.append(word)
            continue
        if name is not None:
            raise UsageError(f"`{DEPLOYMENT_FLAG}` given twice", usage)
        if not has_value:
            if index >= len(words) or words[index].startswith("--"):
                raise UsageError(f"`{DEPLOYMENT_FLAG}` needs a value (NAME)", usage)
            value = words[index]
            index += 1
        if not _DEPLOYMENT.match(value):
            raise UsageError(f"{DEPLOYMENT_FLAG}: {value!r} is not a deployment name", usage)
        name = value
    return rest, name


def _parse_args(command: Command, words: list[str]) -> dict[str, Any]:
    usage = f"Usage: `{command.usage()}`"
    options = {p.flag: p for p in command.params if p.flag}
    positionals = [p for p in command.params if p.flag is None]
    raw: dict[str, Any] = {}
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word.startswith("--") and len(word) > 2:
            flag, has_value, value = word.partition("=")
            param = options.get(flag)
            if param is None:
                raise UsageError(f"unknown option `{flag}`", usage)
            if param.name in raw:
                raise UsageError(f"`{flag}` given twice", usage)
            if param.switch:
                if has_value:
                    raise UsageError(f"`{flag}` takes no value", usage)
                raw[param.name] = True
                continue
            if not has_value:
                if index >= len(words) or words[index].startswith("--"):
                    raise UsageError(f"`{flag}` needs a value ({param.metavar})", usage)
                value = words[index]
                index += 1
            raw[param.name] = _convert(param, value, usage)
            continue
        if not positionals:
            raise NotACommand(f"unexpected `{word}`", usage)
        param = positionals.pop(0)
        if param.rest:
            raw[param.name] = " ".join(words[index - 1 :])
            break
        raw[param.name] = _convert(param, word, usage)
    for param in command.params:
        if param.name not in raw:
            if param.required:
                raise UsageError(f"missing {param.flag or param.metavar}", usage)
            raw[param.name] = False if param.switch else param.default
    for group in command.exclusive:
        given = [n for n in group if raw[n] not in (None, False)]
        if len(given) > 1:
            flags = " and ".join(f"`{_label(command, n)}`" for n in given)
            raise UsageError(f"{flags} cannot be used together", usage)
    return raw


def _label(command: Command, name: str) -> str:
    param = next(p for p in command.params if p.name == name)
    return param.flag or param.metavar


def _convert(param: Param, value: str, usage: str) -> Any:
    """Apply the argument type; its ValueError, or the BadInput of an `ops` validator used as a type, becomes
    the usage error."""
    try:
        return param.kind(value)
    except (ValueError, OverflowError) as exc:  # an argument type that missed a bound still gets the usage
        raise UsageError(f"{param.flag or param.metavar}: {exc}", usage) from None
    except BadInput as exc:
        raise UsageError(f"{param.flag or param.metavar}: {exc.message}", usage) from None


registry = Registry()
"""The bot's one registry; handler modules declare their commands on it (see `bot.handlers`)."""
