"""ops.vllm.deploy: startup script (syntax, token hygiene, quoting, stub-tool run), gcloud command,
GKE YAML."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from ops.errors import BadInput
from ops.gcp.cloudlogs import NODE_LABEL, WORKER_LABEL
from ops.vllm.deploy import StartupConfig, gcloud_command, gke_manifest, startup_script
from ops.vllm.dockerrun import TPU_ENV_READ
from ops.vllm.ssh import TEMPLATES, RemoteHost
from sim.host import generate_ed25519_key

BASH = shutil.which("bash") or "bash"
TOKEN = "hf_FAKEtokenVALUE0123456789"
HOSTILE = ["x; rm -rf /", "$(id)", "`id`", "a/b; id", "a/$(id)", "google/gemma 4", "-rf/x", "a/b\nid", ""]

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")


def _cfg(**kw: object) -> StartupConfig:
    return StartupConfig(project="demo-project", **kw)  # type: ignore[arg-type]


def _bash_n(text: str, tmp_path: Path) -> None:
    path = tmp_path / "check.sh"
    path.write_text(text)
    proc = subprocess.run([BASH, "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# ---- StartupConfig / startup_script ----------------------------------------------------------------------


def test_defaults() -> None:
    cfg = _cfg()
    assert (cfg.model, cfg.image, cfg.tensor_parallel_size, cfg.max_model_len, cfg.port) == (
        "google/gemma-4-31B-it",
        "vllm/vllm-tpu:gemma4",
        8,
        16384,
        8000,
    )
    assert (cfg.hf_token_secret, cfg.container_name) == ("hf-token", "vllm-gemma4")


def test_startup_script_is_valid_bash(tmp_path: Path) -> None:
    script = startup_script(_cfg())
    assert script.startswith("#!/bin/bash\n")
    _bash_n(script, tmp_path)


def test_startup_script_content() -> None:
    script = startup_script(_cfg())
    assert "set +x" in script and "set -x" not in script
    assert "gcloud secrets versions access latest --secret=hf-token --project=demo-project" in script
    assert "docker rm -f vllm-gemma4" in script
    assert script.index("docker rm -f") < script.index("docker run")
    flat = " ".join(
        shlex.split(script[script.index("docker run") :].split("\nstatus=")[0].replace("\\\n", " "))
    )
    assert flat == (
        "docker run -d --name vllm-gemma4 --privileged --net=host --shm-size 16G -v /dev/shm:/dev/shm "
        "--log-driver gcplogs --log-opt gcp-project=demo-project --log-opt labels=tpu_node,tpu_worker_id "
        "--log-opt cache-disabled=false --label tpu_node=$node_id --label tpu_worker_id=$worker_id "
        "--env HF_TOKEN vllm/vllm-tpu:gemma4 vllm serve google/gemma-4-31B-it --tensor-parallel-size 8 "
        "--max-model-len 16384 --host 0.0.0.0 --port 8000 --enable-auto-tool-choice "
        "--tool-call-parser gemma4 --reasoning-parser gemma4 --disable_chunked_mm_input"
    )
    # Nothing is installed, nothing downloaded: curl asks only the metadata server for tpu-env.
    for installer in ("apt-get", "apt ", "pip ", "pip3", "wget", "snap", "| sh", "| bash"):
        assert installer not in script
    assert [line for line in script.splitlines() if "curl " in line] == [
        "tpu_env=\"$(curl -sf --max-time 10 -H 'Metadata-Flavor: Google' "
        'http://metadata.google.internal/computeMetadata/v1/instance/attributes/tpu-env)" || tpu_env=""'
    ]
    assert script.count("metadata.google.internal") == 1
    # Token hygiene of the log driver: no option copies the environment (HF_TOKEN) or the command into
    # the entries (moby daemon/logger/gcplogs: env, env-regex, gcp-log-cmd).
    options = re.findall(r"--log-opt (\S+?)=", script)
    assert set(options) == {"gcp-project", "labels", "cache-disabled"}
    assert "env-regex" not in script and "gcp-log-cmd" not in script


def test_the_startup_script_and_the_bots_docker_run_are_one_run() -> None:
    """The container the bot runs (/vllm start, /vllm restart) is the startup script's: the same flags, log
    driver, log options, label names, image and command (ops.vllm.dockerrun), every value of the bot's
    checked and quoted by its kind. The labels' values differ only in where they come from: the script's
    shell variables and the values the bot read from the same tpu-env attribute."""
    key = generate_ed25519_key()
    remote = RemoteHost("127.0.0.1", user="u", pkey=key, pinned_host_keys={key.get_name(): key.get_base64()})
    command = remote.render(
        "docker_run_vllm_gcplogs",
        secret="hf-token",
        container="vllm-gemma4",
        image="vllm/vllm-tpu:gemma4",
        model="google/gemma-4-31B-it",
        tensor_parallel_size=8,
        max_model_len=16384,
        port=8000,
        project="demo-project",
        node_label=NODE_LABEL,
        worker_label=WORKER_LABEL,
        node="gemma4-qr-node",
        worker=0,
    )
    bot = shlex.split(command[command.index("docker run") :])
    script = startup_script(_cfg())
    ran = shlex.split(script[script.index("docker run") :].split("\nstatus=")[0].replace("\\\n", " "))
    bot_labels = {
        "tpu_node=gemma4-qr-node": "tpu_node=$node_id",
        "tpu_worker_id=0": "tpu_worker_id=$worker_id",
    }
    # the bot's `-e HF_TOKEN --` is the script's `--env HF_TOKEN`: both take the token from the environment
    assert [bot_labels.get(word, "--env" if word == "-e" else word) for word in bot if word != "--"] == ran
    assert (
        _options(bot, "--log-opt")
        == _options(ran, "--log-opt")
        == [
            "gcp-project=demo-project",
            "labels=tpu_node,tpu_worker_id",
            "cache-disabled=false",
        ]
    )
    # the node and worker come from the same metadata attribute, read the same way
    assert TEMPLATES["tpu_env"].text == TPU_ENV_READ and f'tpu_env="$({TPU_ENV_READ})"' in script


def test_startup_script_never_handles_the_token_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    script = startup_script(_cfg())
    assert TOKEN not in script
    assert "HF_TOKEN=" not in script.replace('HF_TOKEN=""', "").replace('HF_TOKEN="$(gcloud', "")
    for line in script.splitlines():
        if "echo" in line or line.lstrip().startswith("log "):
            assert "HF_TOKEN" not in line


@pytest.mark.parametrize("field", ["model", "image", "hf_token_secret", "container_name", "project"])
@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_strings_are_rejected(field: str, value: str) -> None:
    kw = {"project": "demo-project", field: value}
    with pytest.raises(BadInput):
        StartupConfig(**kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tensor_parallel_size", 0),
        ("tensor_parallel_size", "8"),
        ("tensor_parallel_size", True),
        ("tensor_parallel_size", 8.0),
        ("max_model_len", -1),
        ("port", 0),
        ("port", 70000),
        ("port", "8000; id"),
    ],
)
def test_bad_integers_are_rejected(field: str, value: object) -> None:
    with pytest.raises(BadInput):
        _cfg(**{field: value})


@pytest.mark.parametrize(
    "image",
    [
        "vllm/vllm-tpu:gemma4",
        "vllm/vllm-tpu:nightly-20260604-2aaa59e-4f423bd",
        "us-docker.pkg.dev/my-project/repo/vllm-tpu:gemma4",
        "localhost:5000/vllm:latest",
        "vllm/vllm-tpu@sha256:" + "a" * 64,
    ],
)
def test_valid_image_references(image: str) -> None:
    assert _cfg(image=image).image == image


# The TPU runtime's tpu-env metadata attribute, as a TPU VM serves it (one "KEY: 'value'" a line; the
# form torch_xla's torch_xla/_internal/tpu.py parses).
TPU_ENV = "ACCELERATOR_TYPE: 'v6e-8'\nNODE_ID: 'gemma4-qr-node'\nWORKER_ID: '0'\nZONE: 'us-east5-a'\n"


def _stub_tools(
    tmp_path: Path, *, token_ok: bool = True, tpu_env: str = TPU_ENV, gcplogs_ok: bool = True
) -> dict[str, str]:
    """Stand-ins for the VM's tools that record their argv (this machine has no TPU VM, docker daemon or
    metadata server): gcloud prints the token, curl the tpu-env attribute, docker records and succeeds
    (with `gcplogs_ok` False, `docker run --log-driver gcplogs` fails as the driver does without access)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    (bin_dir / "gcloud").write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "gcloud $*" >> {shlex.quote(str(log))}\n'
        + (f"printf '%s\\n' {shlex.quote(TOKEN)}\n" if token_ok else "echo 'PERMISSION_DENIED' >&2; exit 1\n")
    )
    (bin_dir / "curl").write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "curl $*" >> {shlex.quote(str(log))}\n'
        f"printf '%s' {shlex.quote(tpu_env)}\n"
    )
    refuse = (
        ""
        if gcplogs_ok
        else 'case " $* " in *" --log-driver gcplogs "*) echo "unable to connect or authenticate with Google '
        'Cloud Logging" >&2; '
        f'for a in "$@"; do printf "%s\\n" "$a"; done > {shlex.quote(str(tmp_path))}/argv.run.gcplogs; '
        "exit 125;; esac\n"
    )
    (bin_dir / "docker").write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "docker $*" >> {shlex.quote(str(log))}\n'
        + refuse
        + f'for a in "$@"; do printf "%s\\n" "$a"; done > {shlex.quote(str(tmp_path))}/argv.$1\n'
        f'printf "%s" "${{HF_TOKEN-}}" > {shlex.quote(str(tmp_path))}/env.$1\n'
    )
    (bin_dir / "sleep").write_text("#!/bin/bash\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}


def _run(script: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "startup.sh"
    path.write_text(script)
    return subprocess.run(
        [BASH, str(path)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=30
    )


def test_startup_script_runs_against_stub_tools(tmp_path: Path) -> None:
    env = _stub_tools(tmp_path)
    proc = _run(startup_script(_cfg()), tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr
    calls = (tmp_path / "calls").read_text()
    assert TOKEN not in calls  # not on any command line
    assert (
        calls.splitlines()[0]
        == "gcloud secrets versions access latest --secret=hf-token --project=demo-project"
    )
    assert "docker pull vllm/vllm-tpu:gemma4" in calls
    assert calls.index("docker rm -f vllm-gemma4") < calls.index("docker run")
    argv = (tmp_path / "argv.run").read_text().splitlines()
    assert argv[argv.index("--env") + 1] == "HF_TOKEN"
    assert argv[argv.index("vllm/vllm-tpu:gemma4") + 1 :][:3] == ["vllm", "serve", "google/gemma-4-31B-it"]
    assert (tmp_path / "env.run").read_text() == TOKEN  # docker got it from the environment
    assert (tmp_path / "env.pull").read_text() == ""  # not exported before docker run
    assert (tmp_path / "env.rm").read_text() == ""
    # vLLM's output goes to Cloud Logging, labelled with the node and worker the TPU runtime published.
    assert _options(argv, "--log-driver") == ["gcplogs"]
    assert _options(argv, "--log-opt") == [
        "gcp-project=demo-project",
        "labels=tpu_node,tpu_worker_id",
        "cache-disabled=false",  # Docker's local copy: `docker logs` keeps working
    ]
    assert _options(argv, "--label") == ["tpu_node=gemma4-qr-node", "tpu_worker_id=0"]
    assert (
        "curl -sf --max-time 10 -H Metadata-Flavor: Google http://metadata.google.internal/computeMetadata/v1/instance/attributes/tpu-env"
        in calls
    )


def _options(argv: list[str], flag: str) -> list[str]:
    """The values given to `flag` in a docker argv, before the image."""
    before_image = argv[: argv.index("vllm/vllm-tpu:gemma4")]
    return [before_image[i + 1] for i, a in enumerate(before_image) if a == flag]


@pytest.mark.parametrize(
    "tpu_env",
    [
        "",  # no metadata server answer
        "NODE_ID: 'x\"; touch PWNED_NODE; \"'\nWORKER_ID: '$(touch PWNED_WORKER)'\n",
        "NODE_ID: 'Bad_Name'\nWORKER_ID: '99999'\n",
    ],
)
def test_a_missing_or_hostile_tpu_env_labels_nothing_from_it(tmp_path: Path, tpu_env: str) -> None:
    proc = _run(startup_script(_cfg()), tmp_path, _stub_tools(tmp_path, tpu_env=tpu_env))
    assert proc.returncode == 0, proc.stderr
    argv = (tmp_path / "argv.run").read_text().splitlines()
    assert _options(argv, "--label") == ["tpu_node=unknown", "tpu_worker_id=0"]
    assert "labelled tpu_node=unknown" in proc.stdout
    assert not list(tmp_path.glob("PWNED*"))


def test_vllm_still_starts_when_the_gcplogs_driver_is_refused(tmp_path: Path) -> None:
    proc = _run(startup_script(_cfg()), tmp_path, _stub_tools(tmp_path, gcplogs_ok=False))
    assert proc.returncode == 0, proc.stderr
    assert "gcplogs log driver failed" in proc.stdout and "roles/logging.logWriter" in proc.stdout
    assert "docker logs only, not Cloud Logging" in proc.stdout
    tried = (tmp_path / "argv.run.gcplogs").read_text().splitlines()
    assert _options(tried, "--log-driver") == ["gcplogs"]
    argv = (tmp_path / "argv.run").read_text().splitlines()  # the second run, Docker's default driver
    assert "--log-driver" not in argv and argv[argv.index("vllm/vllm-tpu:gemma4") + 1 :][:2] == [
        "vllm",
        "serve",
    ]
    assert (tmp_path / "env.run").read_text() == TOKEN
    calls = (tmp_path / "calls").read_text()
    assert TOKEN not in calls + proc.stdout + proc.stderr
    assert calls.count("docker rm -f vllm-gemma4") == 2  # the half-created container goes first


def test_an_inherited_hf_token_is_not_exported_early(tmp_path: Path) -> None:
    env = {**_stub_tools(tmp_path), "HF_TOKEN": "inherited"}
    proc = _run(startup_script(_cfg()), tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "env.pull").read_text() == ""
    assert (tmp_path / "env.run").read_text() == TOKEN


def test_startup_script_fails_cleanly_without_a_token(tmp_path: Path) -> None:
    env = _stub_tools(tmp_path, token_ok=False)
    proc = _run(startup_script(_cfg()), tmp_path, env)
    assert proc.returncode == 1
    assert "no Hugging Face token" in proc.stdout
    assert "docker run" not in (tmp_path / "calls").read_text()


def test_values_are_quoted_even_if_validation_were_bypassed(tmp_path: Path) -> None:
    cfg = _cfg()
    object.__setattr__(cfg, "model", "x/y; touch PWNED_MODEL")
    object.__setattr__(cfg, "image", "img$(touch PWNED_IMAGE)")
    object.__setattr__(cfg, "container_name", "`touch PWNED_NAME`")
    env = _stub_tools(tmp_path)
    proc = _run(startup_script(cfg), tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert not list(tmp_path.glob("PWNED*"))
    argv = (tmp_path / "argv.run").read_text().splitlines()
    assert "x/y; touch PWNED_MODEL" in argv
    assert "img$(touch PWNED_IMAGE)" in argv
    assert "`touch PWNED_NAME`" in argv


# ---- gcloud_command -------------------------------------------------------------------------------------


def _argv(cmd: str) -> list[str]:
    return shlex.split(cmd.replace("\\\n", " "))


BASE = [
    "gcloud",
    "alpha",
    "compute",
    "tpus",
    "queued-resources",
    "create",
    "vllm-gemma4-qr",
    "--zone=us-east5-a",
    "--project=demo-project",
    "--node-id=vllm-gemma4-qr-node",
    "--accelerator-type=v6e-8",
    "--runtime-version=v2-alpha-tpuv6e",
    "--metadata-from-file=startup-script=startup.sh",
]


def _gc(model: str, run: timedelta | None = None, until: timedelta | datetime | None = None) -> str:
    return gcloud_command(
        "vllm-gemma4-qr", "us-east5-a", "demo-project", "v6e-8", "v2-alpha-tpuv6e", model, run, until
    )


def test_gcloud_flex_start(tmp_path: Path) -> None:
    cmd = _gc("flex-start", timedelta(hours=4), timedelta(hours=4))
    assert _argv(cmd) == [
        *BASE,
        "--provisioning-model=flex-start",
        "--max-run-duration=4h",
        "--valid-until-duration=4h",
    ]
    _bash_n(cmd + "\n", tmp_path)


def test_gcloud_spot_on_demand_reserved() -> None:
    assert _argv(_gc("spot")) == [*BASE, "--provisioning-model=spot"]
    assert _argv(_gc("on-demand")) == [*BASE, "--provisioning-model=standard"]
    assert _argv(_gc("reserved")) == [*BASE, "--reserved"]


def test_gcloud_durations_and_deadlines() -> None:
    assert "--max-run-duration=90m" in _argv(_gc("flex-start", timedelta(minutes=90)))
    assert "--max-run-duration=168h" in _argv(_gc("flex-start", timedelta(days=7)))
    until = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert _argv(_gc("spot", None, until))[-1] == "--valid-until-time=2026-01-01T12:00:00Z"
    custom = gcloud_command(
        "qr",
        "us-east5-b",
        "demo-project",
        "v6e-8",
        "v2-alpha-tpuv6e",
        "spot",
        node_id="n1",
        startup_script_file="out/startup.sh",
    )
    assert "--node-id=n1" in _argv(custom)
    assert "--metadata-from-file=startup-script=out/startup.sh" in _argv(custom)


@pytest.mark.parametrize(
    ("model", "run", "until"),
    [
        ("flex-start", None, None),  # flex-start needs a run duration
        ("flex-start", timedelta(days=7, seconds=1), None),
        ("flex-start", timedelta(0), None),
        ("flex-start", timedelta(milliseconds=1500), None),
        ("spot", timedelta(hours=4), None),  # run duration only for flex-start
        ("best-effort", None, None),
        ("STANDARD", None, None),
        ("spot", None, datetime(2026, 1, 1)),  # naive deadline
        ("spot", None, "4h"),
    ],
)
def test_gcloud_bad_provisioning_args(model: str, run: timedelta | None, until: object) -> None:
    with pytest.raises(BadInput):
        _gc(model, run, until)  # type: ignore[arg-type]


@pytest.mark.parametrize("position", range(5))
@pytest.mark.parametrize("value", ["x; rm -rf /", "$(id)", "`id`", "a b", ""])
def test_gcloud_hostile_values_rejected(position: int, value: str) -> None:
    args = ["vllm-gemma4-qr", "us-east5-a", "demo-project", "v6e-8", "v2-alpha-tpuv6e"]
    args[position] = value
    name, zone, project, accel, runtime = args
    with pytest.raises(BadInput):
        gcloud_command(name, zone, project, accel, runtime, "spot")


@pytest.mark.parametrize("value", ["x; rm -rf /", "$(id)", "`id`", "a b", "", "-x"])
def test_gcloud_hostile_node_id_and_script_path_rejected(value: str) -> None:
    args = ("vllm-gemma4-qr", "us-east5-a", "demo-project", "v6e-8", "v2-alpha-tpuv6e", "spot")
    with pytest.raises(BadInput):
        gcloud_command(*args, node_id=value)
    if value != "-x":
        with pytest.raises(BadInput):
            gcloud_command(*args, startup_script_file=value)


# ---- gke_manifest ---------------------------------------------------------------------------------------


def test_gke_manifest_v6e_8() -> None:
    docs = list(yaml.safe_load_all(gke_manifest(_cfg(), "v6e-8")))
    assert [d["kind"] for d in docs] == ["Deployment", "Service"]
    dep, svc = docs
    pod = dep["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": "2x4",
    }
    (container,) = pod["containers"]
    assert container["image"] == "vllm/vllm-tpu:gemma4"
    assert container["resources"]["limits"] == {"google.com/tpu": 8}
    assert container["resources"]["requests"] == {"google.com/tpu": 8}
    assert container["command"] + container["args"] == _cfg().vllm_argv()
    assert container["args"][:3] == ["google/gemma-4-31B-it", "--tensor-parallel-size", "8"]
    (env,) = container["env"]
    assert env == {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "hf_api_token"}},
    }
    assert dep["spec"]["selector"]["matchLabels"] == dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"] == {"app": "vllm-gemma4"}
    assert svc["spec"]["ports"][0]["targetPort"] == 8000


def test_gke_manifest_has_no_token_and_no_anchors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    text = gke_manifest(_cfg(), "v6e-8")
    assert TOKEN not in text
    assert "&id" not in text and "*id" not in text


@pytest.mark.parametrize(
    ("accel", "label", "topo", "n"),
    [
        ("v6e-4", "tpu-v6e-slice", "2x2", 4),
        ("v6e-1", "tpu-v6e-slice", "1x1", 1),
        ("v5litepod-8", "tpu-v5-lite-podslice", "2x4", 8),
    ],
)
def test_gke_manifest_other_single_host_shapes(accel: str, label: str, topo: str, n: int) -> None:
    dep = next(yaml.safe_load_all(gke_manifest(_cfg(tensor_parallel_size=n), accel)))
    pod = dep["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["cloud.google.com/gke-tpu-accelerator"] == label
    assert pod["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == topo
    assert pod["containers"][0]["resources"]["limits"]["google.com/tpu"] == n


def test_gke_manifest_rejects_multi_host_and_bad_names() -> None:
    with pytest.raises(BadInput):
        gke_manifest(_cfg(), "v6e-16")
    with pytest.raises(BadInput):
        gke_manifest(_cfg(container_name="VLLM_Gemma"), "v6e-8")  # valid for docker, not for Kubernetes
    with pytest.raises(BadInput):
        gke_manifest(_cfg(hf_token_secret="HF_TOKEN"), "v6e-8")
    with pytest.raises(BadInput):
        gke_manifest(_cfg(), "v6e-8", hf_token_key="a b")


def test_a_rate_limited_pull_is_not_retried_and_says_when_to_start_again(tmp_path: Path) -> None:
    """The registry refuses pulls until its window has passed (Docker Hub: 6 hours): the script neither
    pulls again 30 s later nor runs the container (whose run would pull again), and says when to start."""
    env = _stub_tools(tmp_path)
    calls = tmp_path / "calls"
    (tmp_path / "bin" / "docker").write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "docker $*" >> {shlex.quote(str(calls))}\n'
        'if [ "$1" = pull ]; then\n'
        "  echo 'Error response from daemon: toomanyrequests: You have reached your unauthenticated pull rate"
        " limit. https://www.docker.com/increase-rate-limit' >&2\n"
        "  exit 1\n"
        "fi\n"
    )
    proc = _run(startup_script(_cfg()), tmp_path, env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "docker pull rate-limited" in proc.stdout and "6 hours" in proc.stdout, proc.stdout
    assert "toomanyrequests" in proc.stdout  # docker's own words are kept in the log
    docker = [line for line in calls.read_text().splitlines() if line.startswith("docker ")]
    assert docker == ["docker pull vllm/vllm-tpu:gemma4"], docker
