"""/fleet's reads through the real clients against the TPU API and vLLM simulators: deployments that read
the TPU API the same way share each zone's listing, and each still shows its own primary."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from bot.config import load_settings
from bot.services import Fleet, Services
from bot.shared.fleet_status import snapshots
from ops.store.state import Store
from sim.gcp import GcpSimulator
from sim.vllm import VllmSimulator
from tests.integration.test_gcp_sim import default_scenario

DEPLOYMENTS = [  # the default world: gemma4-qr, gemma4-standby and gemma4-old, one in each zone
    {"name": "serving", "zones": ["us-east5-a"], "primary": "gemma4-qr"},
    {"name": "waiting", "zones": ["us-east5-a", "asia-northeast1-b"], "primary": "gemma4-standby"},
    {"name": "failed", "zones": ["europe-west4-a"], "primary": "gemma4-old"},
    {"name": "elsewhere", "project": "other-project", "zones": ["us-east5-a"], "primary": "gemma4-qr"},
]


def test_each_zone_is_listed_once_per_project_and_each_deployment_shows_its_primary(tmp_path: Path) -> None:
    scenario = default_scenario()
    gcp, vllm = GcpSimulator(scenario).start(), VllmSimulator(scenario["vllm"]).start()
    deployments = tmp_path / "deployments.yaml"
    deployments.write_text(yaml.safe_dump({"deployments": DEPLOYMENTS}))
    settings = load_settings(
        _env_file=None,
        slack_bot_token="xoxb-1",
        slack_signing_secret="s",
        gcp_project=gcp.project,
        tpu_zones="us-east5-a",
        google_api_endpoint=gcp.url,
        vllm_base_url=vllm.url,
        deployments_file=str(deployments),
    )
    store = Store(f"sqlite:///{tmp_path}/state.db")
    fleet = Fleet.from_settings(settings, lambda each: Services.from_settings(each, store=store))
    try:
        start = len(gcp.requests)
        snaps = {snap.name: snap for snap in snapshots(fleet.services, fleet.first.now())}
        lists = [
            (match["project"], match["zone"])
            for _, path in gcp.requests[start:]
            if (
                match := re.search(
                    r"/projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)/queuedResources\?", path
                )
            )
        ]
    finally:
        for services in fleet.services.values():
            services.close()
        store.close()
        gcp.stop()
        vllm.stop()
    assert sorted(lists) == [
        (gcp.project, "asia-northeast1-b"),
        (gcp.project, "europe-west4-a"),
        (gcp.project, "us-east5-a"),
        ("other-project", "us-east5-a"),  # another project's reader lists the zone itself
    ]
    for name, primary in (("serving", "gemma4-qr"), ("waiting", "gemma4-standby"), ("failed", "gemma4-old")):
        assert f"`{primary}`" in snaps[name].lines[0], snaps[name].lines
    waiting = snaps["waiting"].listing
    assert not isinstance(waiting, Exception)
    assert [qr.name for qr in waiting.resources] == ["gemma4-standby", "gemma4-qr"]  # both zones, by zone
