"""A fix fits the queued resource's state: a FAILED, SUSPENDED or deleted resource waits for nothing, so its
fix deletes or recovers it (with the command), never "wait until valid-until"."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ops.diagnosis.engine import ResourceState, diagnose
from ops.diagnosis.families import QUEUED_RESOURCE_STATES, FixFacts, catalogue, figures, fill, load_file
from ops.tpu.model import QueuedResourceInfo
from tests.unit.test_alerts import qr

# Several wordings of each create-error family (Google API, gcloud, Terraform), as a FAILED resource's error.
CREATE_ERRORS = {
    "tpu-stockout": [
        'There is no more capacity in the zone "europe-west4-a"; you can try in another zone where Cloud TPU '
        "Nodes are offered (see https://cloud.google.com/tpu/docs/regions)",
        "Error code 8, message: ZONE_RESOURCE_POOL_EXHAUSTED",
        "The zone does not have enough resources available to fulfill the request. Try a different zone.",
        "Insufficient capacity for the requested TPU slice",
    ],
    "tpu-quota-exhausted": [
        "Quota 'TPUV6EPreemptiblePodPerProjectPerZoneForTPUAPI' exceeded. Limit: 16.0 in zone us-east5-a.",
        "Insufficient quota to satisfy the request",
    ],
    "tpu-quota-zero": [
        "Quota 'TPUV6EPodPerProjectPerZoneForTPUAPI' exceeded. Limit: 0.0 in zone asia-east1-c."
    ],
    "tpu-accelerator-not-offered": [
        'The requested accelerator configuration for accelerator type, "v6e-4", could not be found in the '
        'zonal accelerator configurations for "asia-east1-a".',
        "accelerator v6e-8 was not found in zone us-west1-c",
    ],
    "tpu-provisioning-model-not-offered": [
        'FLEX_START provisioning model is not supported for accelerator type \\"v6e-4\\" in location '
        '\\"asia-east1-c\\"',
        "SPOT provisioning model is not supported",
    ],
    "tpu-zone-unknown": ["Location us-nowhere1-z not found"],
}
WORDINGS = [(name, text) for name, texts in CREATE_ERRORS.items() for text in texts]
WAITING_WORDS = ("keeps waiting", "valid-until", "or wait")


@pytest.mark.parametrize(("family", "error"), WORDINGS)
@pytest.mark.parametrize("state", ["FAILED", "SUSPENDED"])
def test_a_dead_resource_gets_delete_or_recover_with_its_command(family: str, error: str, state: str) -> None:
    findings = diagnose(error, FixFacts(name="gemma4-old", zone="europe-west4-a", state=state)).findings
    assert findings and findings[0].name == family
    fix = findings[0].fix
    assert not any(word in fix for word in WAITING_WORDS), fix
    assert "/tpu delete gemma4-old" in fix or "/tpu recover gemma4-old" in fix, fix
    assert state in fix and "?" not in fix


@pytest.mark.parametrize(("family", "error"), WORDINGS)
def test_a_resource_being_deleted_is_not_told_to_wait(family: str, error: str) -> None:
    findings = diagnose(error, FixFacts(name="gemma4-b", state="DELETING")).findings
    assert findings[0].name == family
    assert not any(word in findings[0].fix for word in WAITING_WORDS)


@pytest.mark.parametrize("state", [None, "WAITING_FOR_RESOURCES", "ACCEPTED"])
def test_a_waiting_request_or_a_create_error_keeps_the_general_fix(state: str | None) -> None:
    error = CREATE_ERRORS["tpu-stockout"][0]
    finding = diagnose(error, FixFacts(name="gemma4-b", state=state)).findings[0]
    assert finding.fix == fill(catalogue()["tpu-stockout"].fix, figures(finding.values))
    assert diagnose(error, FixFacts(state=state)).top is not None


def test_every_create_family_has_a_fix_for_dead_resources_that_never_waits() -> None:
    """The kind, not the example: every family that classifies create errors (stockout, quota, type, model,
    zone) says what to do with a FAILED or SUSPENDED resource, and no state-specific fix says to wait."""
    for family in catalogue().families:
        if family.create:
            assert {"FAILED", "SUSPENDED", "DELETING"} <= set(family.fix_when), family.name
        for state, fix in family.fix_when.items():
            assert state in QUEUED_RESOURCE_STATES
            assert not any(word in fix for word in WAITING_WORDS), (family.name, state)


def test_the_top_finding_uses_the_state_variant() -> None:
    known = diagnose(CREATE_ERRORS["tpu-stockout"][1], FixFacts(name="gemma4-standby", state="FAILED")).top
    assert known is not None and "/tpu recover gemma4-standby --search" in known.fix


def _qr(state: str, error: str | None) -> QueuedResourceInfo:
    return qr(state, name="gemma4-standby", zone="asia-northeast1-b", error=error)


def test_a_failed_resource_state_text_gets_the_recover_fix() -> None:
    qr = _qr("FAILED", CREATE_ERRORS["tpu-stockout"][0])
    result = diagnose(ResourceState.of(qr), FixFacts(name=qr.name, zone=qr.zone, state=qr.state))
    assert result.findings[0].name == "tpu-stockout"
    assert "/tpu recover gemma4-standby" in result.findings[0].fix


def test_suspended_says_recover_with_the_name() -> None:
    qr = _qr("SUSPENDED", None)
    found = diagnose(ResourceState.of(qr), FixFacts(name=qr.name, state=qr.state)).findings
    assert found[0].name == "tpu-suspended" and "/tpu recover gemma4-standby" in found[0].fix


@pytest.mark.parametrize(
    ("fix_when", "problem"),
    [
        ("{BROKEN: text}", "is not a queued-resource state"),
        ("[a, b]", "fix_when: Input should be a valid dictionary"),
        ("{FAILED: ''}", "fix_when.FAILED: String should have at least 1 character"),
    ],
)
def test_a_bad_fix_when_in_a_team_file_is_refused(tmp_path: Path, fix_when: str, problem: str) -> None:
    path = tmp_path / "faults.yaml"
    path.write_text(
        "families:\n  - name: my-fault\n    patterns: ['boom']\n    conclusion: c\n    fix: f\n"
        f"    fix_when: {fix_when}\n"
    )
    with pytest.raises(ValueError, match=problem):
        load_file(path)


def test_a_team_file_may_list_several_states_in_one_key(tmp_path: Path) -> None:
    path = tmp_path / "faults.yaml"
    path.write_text(
        "families:\n  - name: my-fault\n    patterns: ['boom']\n    conclusion: c\n    fix: general\n"
        "    fix_when:\n      FAILED, SUSPENDED: recover {qr_name}\n"
    )
    (family,) = load_file(path)
    assert family.fix_for("SUSPENDED") == "recover {qr_name}" and family.fix_for("ACTIVE") == "general"


def test_a_finding_that_names_a_node_writes_its_fix_for_the_resource_that_owns_it() -> None:
    """A log of the deployment (its facts name the primary, gemma4-qr) saying another resource's node is
    gone: the fix acts on gemma4-b, which owns that node, in gemma4-b's state, never on the primary; a node
    no read resource owns leaves the facts as given."""
    owners = (
        ("gemma4-qr-node", "gemma4-qr", "us-east5-a", "ACTIVE"),
        ("gemma4-b-node", "gemma4-b", "us-east5-b", "SUSPENDED"),
    )
    primary = FixFacts(name="gemma4-qr", zone="us-east5-a", state="ACTIVE", owners=owners)
    (found,) = diagnose("node gemma4-b-node is gone", primary).findings
    assert found.name == "tpu-node-gone"
    assert "/tpu recover gemma4-b deletes gemma4-b" in found.fix and "gemma4-qr" not in found.fix, found.fix
    (own,) = diagnose("node gemma4-qr-node is gone", primary).findings
    assert "/tpu delete gemma4-qr --force" in own.fix, own.fix
    # Without owners read, the facts stand as given.
    (plain,) = diagnose("node gemma4-b-node is gone", FixFacts(name="gemma4-qr", state="ACTIVE")).findings
    assert "/tpu delete gemma4-qr --force" in plain.fix


def test_a_fix_for_another_resource_beside_the_running_primary_adds_allow_second() -> None:
    """gemma4-old FAILED on a stockout while the primary gemma4-qr runs: its recovery would start a second
    TPU, which /tpu recover refuses without --allow-second, so the fix says it; the primary's own fix, and
    any fix when the primary is not running, leaves it out. A finding redirected to another resource's node
    (FixFacts.about) is judged for that resource."""
    stockout = "There is no more capacity in the zone europe-west4-a"
    running = ("gemma4-qr", "us-east5-a")
    old = FixFacts(name="gemma4-old", zone="europe-west4-a", state="FAILED", running_primary=running)
    (found,) = diagnose(ResourceState("gemma4-old", "FAILED", stockout), old).findings
    assert "/tpu recover gemma4-old --search --allow-second" in found.fix, found.fix
    alone = replace(old, running_primary=None)
    (found,) = diagnose(ResourceState("gemma4-old", "FAILED", stockout), alone).findings
    assert "/tpu recover gemma4-old --search" in found.fix and "--allow-second" not in found.fix, found.fix
    owners = (("gemma4-b-node", "gemma4-b", "us-east5-b", "SUSPENDED"),)
    primary = FixFacts(
        name="gemma4-qr", zone="us-east5-a", state="ACTIVE", owners=owners, running_primary=running
    )
    assert not primary.beside_primary() and primary.about({"node": "gemma4-b-node"}).beside_primary()
    (other,) = diagnose("node gemma4-b-node is gone", primary).findings
    assert "/tpu recover gemma4-b --allow-second" in other.fix, other.fix
    # A resource of the primary's name without a zone is the primary.
    assert not FixFacts(name="gemma4-qr", running_primary=running).beside_primary()
