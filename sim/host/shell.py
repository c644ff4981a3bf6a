"""The shell of the SIMULATED TPU VM (`sim.host`): a tiny shell-word lexer and the command-line structure the
simulator accepts (`;`, `||`, `|`, `2>&1`); anything a shell would expand is refused, never run."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

NOT_ALLOWED = "command not allowed in simulator"


@dataclass(frozen=True)
class Tok:
    """A word or an unquoted operator of a command line."""

    raw: str  # as written (quotes included) for words; the operator for operators
    op: bool

    @property
    def word(self) -> str:
        """The word as the shell passes it (quotes removed)."""
        parts = shlex.split(self.raw)
        return parts[0] if parts else ""


_OPS = ("||", "&&", ">&", "|", ";", "&", ">", "<")


def lex(command: str) -> list[Tok]:
    """Split a command line into words (quotes kept in `raw`) and unquoted operators.

    Raises:
        ValueError: unbalanced quotes or a newline.
    """
    tokens: list[Tok] = []
    word: list[str] = []
    i, n = 0, len(command)

    def flush() -> None:
        if word:
            tokens.append(Tok("".join(word), False))
            word.clear()

    while i < n:
        ch = command[i]
        if ch == "'":
            end = command.find("'", i + 1)
            if end < 0:
                raise ValueError("unbalanced single quote")
            word.append(command[i : end + 1])
            i = end + 1
        elif ch == '"':
            j = i + 1
            while j < n and command[j] != '"':
                j += 2 if command[j] == "\\" else 1
            if j >= n:
                raise ValueError("unbalanced double quote")
            word.append(command[i : j + 1])
            i = j + 1
        elif ch == "\\":
            word.append(command[i : i + 2])
            i += 2
        elif ch in " \t":
            flush()
            i += 1
        elif ch == "\n":
            raise ValueError("newline")
        elif ch in "|&;<>":
            flush()
            op = next(o for o in _OPS if command.startswith(o, i))
            tokens.append(Tok(op, True))
            i += len(op)
        else:
            word.append(ch)
            i += 1
    flush()
    return tokens


def expands(raw: str) -> bool:
    """True if a shell would expand something in this word ($, backticks, or unquoted globs)."""
    i, quote = 0, ""
    while i < len(raw):
        ch = raw[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif ch == "\\":
            i += 1
        elif ch in "$`":
            return True
        elif ch == "'" and not quote:
            quote = "'"
        elif ch == '"':
            quote = "" if quote == '"' else '"'
        elif ch in "*?[~" and not quote:
            return True
        i += 1
    return False


class ShellExit(Exception):
    """`exit N`: the command line stops with status N."""

    def __init__(self, status: int) -> None:
        self.status = status


class NotAllowed(Exception):
    """A command shape the simulator does not serve (answered with exit 127 and NOT_ALLOWED)."""


@dataclass
class SimpleCommand:
    """A simple command: its words, and whether it ends with `2>&1`."""

    words: list[Tok]
    stderr_to_stdout: bool = False


def split_at(tokens: list[Tok], op: str) -> list[list[Tok]]:
    """The token runs between occurrences of the operator `op`."""
    parts: list[list[Tok]] = [[]]
    for tok in tokens:
        if tok.op and tok.raw == op:
            parts.append([])
        else:
            parts[-1].append(tok)
    return parts


def simple_command(tokens: list[Tok]) -> SimpleCommand:
    """One simple command: words plus the only redirection allowed, `2>&1`."""
    out = SimpleCommand([])
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if (
            not tok.op
            and tok.raw == "2"
            and i + 2 < len(tokens)
            and tokens[i + 1].op
            and tokens[i + 1].raw == ">&"
            and tokens[i + 2].raw == "1"
        ):
            out.stderr_to_stdout = True
            i += 3
            continue
        if tok.op:
            raise NotAllowed(tok.raw)
        out.words.append(tok)
        i += 1
    if not out.words:
        raise NotAllowed("empty command")
    return out
