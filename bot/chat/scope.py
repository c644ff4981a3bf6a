"""What a chat answer's facts and tool results are about, and what the chat's tools read when the model
names no subject.

A subject is a queued resource or a deployment (`llm.grounding.Scope`): a node stands for its queued
resource, a deployment for itself and every queued resource it watches. The question's subjects are those
`bot.chat.subjects.resolve` found: the queued resources it (or its thread) names, the deployments it names
with their queued resources, and, when it names nothing, the channel's whole deployment.

The facts about vLLM, its container and the logs, and the tools called without a subject, are read where
the question points (`Aim`): the subjects' own nodes in their own deployment ("why is staging's vLLM slow?"
reads staging's), never every node of the asking one. Pure logic: `bot.handlers.chat` reads the facts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.chat.subjects import Known, Subjects
from llm.grounding import Scope

__all__ = ["NODE_PARAM", "Aim", "Read", "ToolPlan", "aim_of", "home_of", "plan_call", "scope_of"]

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
        unknown name alone).
    """
    names: dict[str, set[str]] = {}
    deployments: set[str] = set()
    for deployment, resources in _listings(known).items():
        if deployment:
            key = deployment.lower()
            deployments.add(key)
            names.setdefault(key, set()).update({key, *(resource.lower() for resource in resources)})
        for resource, nodes in resources.items():
            names.setdefault(resource.lower(), set()).add(resource.lower())
            for node in nodes:
                names.setdefault(node.lower(), set()).add(resource.lower())
    frozen = {name: frozenset(subjects_) for name, subjects_ in names.items()}
    asked: set[str] = {name.lower() for name in (*subjects.resources, *subjects.elsewhere)}
    for deployment in subjects.deployments:
        asked |= frozen.get(deployment.lower(), frozenset({deployment.lower()}))
    if subjects.origin == "channel deployment" and known.deployment:
        asked |= frozen.get(known.deployment.lower(), frozenset())
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
    """

    deployment: str
    resources: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    serving: str = ""
    every: tuple[str, ...] = ()

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
    nodes = tuple(dict.fromkeys(node for name in resources for node in listing.get(name, ())))
    primary = primaries.get(deployment, "")
    return Aim(deployment, resources, nodes, primary if primary in listing else "", tuple(listing))


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
    """

    arguments: Mapping[str, Any]
    deployment: str
    header: str


@dataclass(frozen=True)
class ToolPlan:
    """How a chat tool call is answered: the commands it runs, in order, and what their results are about;
    or, when there is nothing to read, what the model is told instead (`said`)."""

    reads: tuple[Read, ...]
    about: tuple[str, ...]
    said: str = ""


def plan_call(
    tool: str,
    subject_params: Sequence[str],
    arguments: Mapping[str, Any],
    *,
    known: Known | None,
    scope: Scope,
    aim: Aim,
    serving: bool = False,
) -> ToolPlan:
    """What one chat tool call reads.

    A call that names a subject (a value for one of `subject_params`) reads that one, in the deployment that
    lists it, labelled as not what the question is about when it is not. A call that names none reads what
    the question is about: a node parameter its nodes, one read each (a subject without a node gets a plan
    that says so, never every node's logs); another subject parameter its first queued resource; a tool
    without one the deployment the question points at (a `serving` tool, vLLM's: the resource it runs on).

    Args:
        tool: the tool's name, e.g. "logs".
        subject_params: its parameters that name a queued resource or node, e.g. ("node",).
        arguments: the model's arguments.
        known: the names the bot knows (None: a name resolves to no deployment, and runs in `aim`'s).
        scope: what the question is about.
        aim: where the question points.
        serving: the tool reads the deployment's vLLM server.

    Returns:
        The plan.
    """
    named = next(
        (str(arguments[p]).strip() for p in subject_params if str(arguments.get(p) or "").strip()), ""
    )
    if named:
        home = home_of(known, named) if known is not None else None
        deployment, resource = home if home is not None else (aim.deployment, named)
        asked = scope.about_asked(scope.expand([resource]))
        elsewhere = "" if asked else ", asked for by name: not what the question is about"
        return ToolPlan((Read(arguments, deployment, f"[{tool} of `{named}`{elsewhere}]"),), (resource,))
    if NODE_PARAM in subject_params and aim.resources:
        if not aim.nodes:
            said = (
                f"{scope.label(aim.resources)} has no TPU node, so no {tool} of its own. Another node's are "
                f"not about it: call {tool} with {NODE_PARAM}=NAME to read them."
            )
            return ToolPlan((), aim.resources, said)
        reads = tuple(
            Read(
                {**arguments, NODE_PARAM: node},
                aim.deployment,
                f"[{tool} of node `{node}`: what the question is about]",
            )
            for node in aim.nodes
        )
        return ToolPlan(reads, aim.resources)
    if subject_params and aim.resources:
        first = {**arguments, subject_params[0]: aim.resources[0]}
        return ToolPlan(
            (Read(first, aim.deployment, f"[{tool} of `{aim.resources[0]}`]"),), aim.resources[:1]
        )
    on_serving = serving and bool(aim.serving)
    where = f"deployment `{aim.deployment}`" + (f", vLLM on `{aim.serving}`" if on_serving else "")
    about = (aim.serving,) if on_serving else (aim.deployment,)
    return ToolPlan((Read(arguments, aim.deployment, f"[{tool} of {where}]"),), about)
