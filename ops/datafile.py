"""Data files (YAML) checked against a pydantic schema, with errors that name the file and the line.

A data file is knowledge kept as data (prices, ...): a wrong field must stop the load with a message a person
can act on, "ops/cost/prices.yaml:57: prices[3].region: String should match pattern ...", not a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

__all__ = ["DataFileError", "check", "line_of", "load"]

Schema = TypeVar("Schema", bound=BaseModel)


class DataFileError(ValueError):
    """A data file that cannot be read or does not fit its schema; the message names the file and line."""


def line_of(root: yaml.Node | None, loc: Sequence[int | str]) -> int:
    """The 1-based line of the deepest node of `root` that `loc` reaches (mapping keys, list indexes).

    Args:
        root: the composed document (`yaml.compose`), or None for an empty file.
        loc: a path such as ("prices", 3, "region"), as pydantic gives it.

    Returns:
        The line of that node (of the last node reached when the path goes further than the file), 1 for
        an empty file.
    """
    node = root
    line = node.start_mark.line + 1 if node is not None else 1
    for step in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            child = next((value for key, value in node.value if key.value == str(step)), None)
            if child is None:  # an unknown key: point at the key itself
                child = next((key for key, _ in node.value if key.value == str(step)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
            child = node.value[step]
        if child is None:
            break
        node, line = child, child.start_mark.line + 1
    return line


def _where(loc: Sequence[int | str]) -> str:
    text = ""
    for step in loc:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text or "(top)"


def load(path: str | Path, schema: type[Schema]) -> tuple[Schema, yaml.Node | None]:
    """Read a YAML file and validate it against `schema`.

    Args:
        path: the file.
        schema: a pydantic model (it should forbid extra fields so a mistyped key is an error).

    Returns:
        (the validated model, the composed document for `line_of` in further checks).

    Raises:
        DataFileError: unreadable file, bad YAML, or every schema violation, each as "FILE:LINE: where:
            what" on its own line.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise DataFileError(f"{path}{line}: not valid YAML: {' '.join(str(exc).split())[:200]}") from None
    return check(data if data is not None else {}, schema, path=path, root=root), root


def check(
    data: object, schema: type[Schema], *, path: str | Path | None = None, root: yaml.Node | None = None
) -> Schema:
    """Validate already parsed data against `schema`.

    Args:
        data: what YAML or JSON parsing gave.
        schema: a pydantic model.
        path, root: the file and its composed document, to name the line of each problem; None: the
            problems name only where in the data they are.

    Raises:
        DataFileError: every schema violation, each as "[FILE:LINE: ]where: what" on its own line.
    """
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        problems = [
            (f"{path}:{line_of(root, error['loc'])}: " if path is not None else "")
            + f"{_where(error['loc'])}: "
            + str(error["msg"]).removeprefix("Value error, ")  # a validator's own message says what
            for error in exc.errors()
        ]
        raise DataFileError("\n".join(problems)) from None
