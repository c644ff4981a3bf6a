"""The schema of a fault catalogue file (`ops/diagnosis/faults.yaml`, or a team's `FAULT_CATALOGUE_FILE`):
pydantic models with extra fields forbidden, read through `ops.datafile.load`, so that a wrong field stops
the load with "FILE:LINE: families[3].severity: Input should be ...", not a traceback or a silent default.

The fields are described in the header of `ops/diagnosis/faults.yaml`. Owns only the shape of the file; the
families and wordings built from it live in `ops.diagnosis.families` and `ops.diagnosis.wordings`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, field_validator

from ops.linear import linear

__all__ = [
    "QUEUED_RESOURCE_STATES",
    "CatalogueFile",
    "CreateOutcome",
    "FamilyEntry",
    "WordingEntry",
    "queued_resource_states",
]

Severity = Literal["critical", "error", "warning", "info"]
"""Most severe first (`ops.diagnosis.families.SEVERITIES`)."""
Text = Annotated[str, Field(min_length=1, pattern=r"\S")]
"""Text that is not blank."""

QUEUED_RESOURCE_STATES = frozenset(
    {
        "CREATING",
        "ACCEPTED",
        "PROVISIONING",
        "FAILED",
        "DELETING",
        "ACTIVE",
        "SUSPENDING",
        "SUSPENDED",
        "WAITING_FOR_RESOURCES",
    }
)
"""QueuedResourceState values, https://cloud.google.com/tpu/docs/reference/rest/v2alpha1/projects.locations.queuedResources#state"""

_NAME = linear(r"^[a-z0-9][a-z0-9-]{1,62}$")


def _name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError("`name` must be lower-case words joined by '-', e.g. my-fault")
    return value


def _re2(patterns: list[str]) -> list[str]:
    for raw in patterns:
        try:
            linear(raw)
        except ValueError:
            raise ValueError(
                f"pattern {raw[:60]!r} does not compile as RE2 (no look-around or back-references)"
            ) from None
    return patterns


def queued_resource_states(key: str) -> list[str]:
    """The states of a `fix_when` key ("FAILED" or "FAILED, SUSPENDED"), each checked.

    Raises:
        ValueError: a state that is not a QueuedResourceState value.
    """
    states = [state.strip() for state in key.split(",")]
    for state in states:
        if state not in QUEUED_RESOURCE_STATES:
            known = ", ".join(sorted(QUEUED_RESOURCE_STATES))
            raise ValueError(f"`fix_when` {state!r} is not a queued-resource state ({known})")
    return states


class CreateOutcome(BaseModel):
    """What a create error of this family means for where to try next: `permanent` (retrying the same zone
    and provisioning model cannot succeed) or `transient`; `scope` zone (remembered for the zone) or request
    (this request only)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["permanent", "transient"]
    reason: Text
    scope: Literal["zone", "request"] = "zone"


class FamilyEntry(BaseModel):
    """One `families:` entry (see `ops.diagnosis.families.Family` for what each field becomes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    title: str = ""
    severity: Severity = "critical"
    specificity: StrictInt = 10
    patterns: list[str] = Field(min_length=1)
    conclusion: Text
    fix: Text
    fix_when: dict[str, Text] = Field(default_factory=dict)
    runbook: str = ""
    suppresses: list[str] = Field(default_factory=list)
    create: CreateOutcome | None = None
    sources: list[str] = Field(default_factory=list)
    context: Literal["", "engine-core"] = ""

    _check_name = field_validator("name")(_name)
    _check_patterns = field_validator("patterns")(_re2)

    @field_validator("fix_when")
    @classmethod
    def _states(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            queued_resource_states(key)
        return value


class WordingEntry(BaseModel):
    """One `wordings:` entry: upstream text the code reads that is not a family (`ops.diagnosis.wordings`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    use: Text
    patterns: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    ignore_case: StrictBool = False
    sources: list[str] = Field(default_factory=list)

    _check_name = field_validator("name")(_name)
    _check_patterns = field_validator("patterns")(_re2)


class CatalogueFile(BaseModel):
    """A catalogue file: `families:` (what `ops.diagnosis.families.load_file` reads) and, in the built-in
    file only, `wordings:` (what `ops.diagnosis.wordings.load_wordings` reads); each reader requires its
    own list."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    families: list[FamilyEntry] | None = None
    wordings: list[WordingEntry] | None = None
