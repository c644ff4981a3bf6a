"""Deployment artefacts for vLLM serving Gemma 4 on Cloud TPU: a TPU VM startup script, the equivalent
`gcloud` queued-resource command, and a GKE Deployment + Service manifest.

Everything is pure text generation. Every value interpolated into shell is validated against a strict
pattern first (raising `BadInput`) and then `shlex.quote`d, so a hostile value is rejected rather than run.
The Hugging Face token is never an input here: the startup script reads it from Secret Manager on the VM,
and the GKE manifest references a Kubernetes Secret by name.

Sources: docs/vllm.md §4 (docker flags, explicit `vllm serve` command, `docker rm -f` before a restart) and
docs/google-apis.md §5 (gcloud flags and the API fields they set).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import yaml

from ops.errors import BadInput
from ops.gcp.cloudlogs import CONTAINER_LOG_ID, NODE_LABEL, WORKER_LABEL
from ops.linear import LinearPattern, linear
from ops.times import rfc3339
from ops.tpu.model import FLEX_START_MAX_RUN, PROVISIONING_MODELS, RESOURCE_ID, check_zone
from ops.vllm.dockerrun import GCPLOGS_OPTIONS, RUN_FLAGS, TPU_ENV_READ, UNKNOWN_NODE, VLLM_SERVE
from ops.vllm.ssh import KINDS

__all__ = [
    "FLEX_START_MAX_RUN",
    "PROVISIONING_MODELS",
    "StartupConfig",
    "gcloud_command",
    "gke_manifest",
    "startup_script",
]

# The project, model id, image, secret ids and container name go into the same `docker run` as the bot's
# own `/vllm start` (`ops.vllm.dockerrun`, `ops.vllm.ssh.TEMPLATES`), so they are checked by the same rules
# (`ops.vllm.ssh.KINDS`, `_valid`); queued resource and node ids by the TPU's (`ops.tpu.model.RESOURCE_ID`).
# The artefacts' other values: what each must look like, and the example the refusal gives (`_check`).
_RULES: dict[str, tuple[LinearPattern, str]] = {
    "queued resource id": (RESOURCE_ID, "vllm-gemma4-qr"),
    "node id": (RESOURCE_ID, "vllm-gemma4-qr-node"),
    "accelerator type": (linear(r"^v[0-9][a-z0-9]*-[0-9]+$"), "v6e-8"),
    "runtime version": (linear(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"), "v2-alpha-tpuv6e"),
    "startup script path": (linear(r"^[A-Za-z0-9_./-]+$"), "startup.sh"),
    # Kubernetes DNS-1123 label (Deployment, Service, container names) and subdomain (Secret name).
    "Kubernetes name (container_name)": (linear(r"^[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?$"), "vllm-gemma4"),
    "Kubernetes Secret name": (linear(r"^[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?$"), "hf-token"),
    "Kubernetes Secret key": (linear(r"^[-._A-Za-z0-9]{1,253}$"), "hf_api_token"),
}


# Single-host GKE TPU slices: accelerator type -> (gke-tpu-accelerator label, gke-tpu-topology, chips).
# vLLM on GKE TPUs is single-host only. Source:
# https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus and
# https://cloud.google.com/kubernetes-engine/docs/tutorials/serve-vllm-tpu
_GKE_SLICES: dict[str, tuple[str, str, int]] = {
    "v6e-1": ("tpu-v6e-slice", "1x1", 1),
    "v6e-4": ("tpu-v6e-slice", "2x2", 4),
    "v6e-8": ("tpu-v6e-slice", "2x4", 8),
    "v5litepod-1": ("tpu-v5-lite-podslice", "1x1", 1),
    "v5litepod-4": ("tpu-v5-lite-podslice", "2x2", 4),
    "v5litepod-8": ("tpu-v5-lite-podslice", "2x4", 8),
}


def _valid(value: Any, kind: str, what: str) -> str:
    """`value` when it passes the rule of its kind of value on the TPU VM (`ops.vllm.ssh.KINDS`).

    Raises:
        BadInput: `what` and the value, with the kind's rule as the hint.
    """
    try:
        return KINDS[kind](value)
    except ValueError as exc:
        raise BadInput(f"invalid {what}: {value!r}", f"expected {exc}") from None


def _check(value: Any, what: str) -> str:
    """`value` when it follows the rule of `what` in `_RULES`; else BadInput with that rule's example."""
    pattern, example = _RULES[what]
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise BadInput(f"invalid {what}: {value!r}", f"expected e.g. {example}")
    return value


def _int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadInput(f"invalid {what}: {value!r}", f"expected an integer in [{low}, {high}]")
    return value


@dataclass(frozen=True, kw_only=True)
class StartupConfig:
    """What the TPU VM (or GKE pod) should serve. All fields are validated on construction.

    Attributes:
        project: GCP project id holding the Secret Manager secret (required), e.g. "my-project".
        model: Hugging Face model id, "org/name" or "name" (`ops.vllm.ssh.KINDS["model"]`).
        image: docker image reference (docs/vllm.md §4.1: `vllm/vllm-tpu:gemma4`; `KINDS["image"]`).
        tensor_parallel_size: vLLM `--tensor-parallel-size`, 1..256 (8 for v6e-8, docs/vllm.md §4.1).
        max_model_len: vLLM `--max-model-len` in tokens, 1..1048576 (16384 in the recipes).
        port: HTTP port of the OpenAI-compatible server, 1..65535.
        hf_token_secret: Secret Manager secret id holding the Hugging Face token (startup script), and the
            Kubernetes Secret name (GKE manifest). A name, never the token.
        container_name: docker container name; also the Deployment/Service name on GKE.
        api_key_secret: Secret Manager secret id holding the vLLM API key, or None for no key. The startup
            script reads it on the VM and hands it to vLLM as `VLLM_API_KEY` (vLLM's own variable for
            `--api-key`, vllm/envs.py), so it is in no argv; the bot reads the same secret to send it.

    Raises:
        BadInput: any field fails validation.
    """

    project: str
    model: str = "google/gemma-4-31B-it"
    image: str = "vllm/vllm-tpu:gemma4"
    tensor_parallel_size: int = 8
    max_model_len: int = 16384
    port: int = 8000
    hf_token_secret: str = "hf-token"  # noqa: S105 - a secret *name*, not a credential
    container_name: str = "vllm-gemma4"
    api_key_secret: str | None = None

    def __post_init__(self) -> None:
        _valid(self.project, "project", "GCP project id")
        _valid(self.model, "model", "model id")
        _valid(self.image, "image", "image reference")
        _int(self.tensor_parallel_size, "tensor parallel size", 1, 256)
        _int(self.max_model_len, "max model length", 1, 1 << 20)
        _int(self.port, "port", 1, 65535)
        _valid(self.hf_token_secret, "secret", "secret name")
        _valid(self.container_name, "container", "container name")
        if self.api_key_secret is not None:
            _valid(self.api_key_secret, "secret", "API key secret name")

    def vllm_argv(self) -> list[str]:
        """The explicit server command, as argv: `vllm serve MODEL --tensor-parallel-size N ...`
        (`ops.vllm.dockerrun.VLLM_SERVE`, the bot's own `/vllm start` runs the same).

        An explicit command works whether or not the image has the entrypoint.sh ENTRYPOINT
        (docs/vllm.md §4.2).
        """
        values = {
            "model": self.model,
            "tensor_parallel_size": self.tensor_parallel_size,
            "max_model_len": self.max_model_len,
            "port": self.port,
        }
        # each value stays one word, whatever it holds
        return [word.format(**values) for word in VLLM_SERVE.split()]


def _q(value: str) -> str:
    return shlex.quote(value)


def _secret_block(variable: str, secret: str, project: str, comment: str, missing: str) -> str:
    """Script lines that read Secret Manager `secret` ON THE VM into the shell variable `variable` (5 tries,
    10 s apart; never printed nor exported) and exit 1 with the log line `missing` if it stays empty."""
    read = shlex.join(
        ["gcloud", "secrets", "versions", "access", "latest", f"--secret={secret}", f"--project={project}"]
    )
    return f"""# {comment}
unset {variable}
{variable}=""
for attempt in 1 2 3 4 5; do
  if {variable}="$({read})" && [ -n "${variable}" ]; then
    break
  fi
  {variable}=""
  log "reading secret" {_q(secret)} "failed (attempt $attempt of 5)"
  sleep 10
done
if [ -z "${variable}" ]; then
  log "{missing}"
  exit 1
fi
"""


def startup_script(cfg: StartupConfig) -> str:
    """A bash startup script (GCE `startup-script` metadata) that serves `cfg.model` with vLLM in docker.

    What it does, as root on each boot: checks that `docker` and `gcloud` exist (it installs nothing; TPU VM
    runtime images ship both), reads the Hugging Face token with
    `gcloud secrets versions access latest --secret=NAME --project=P` on the VM (retrying 5 times), pulls the
    image (retrying 3 times 30 s apart, for a network that fails; a pull the registry rate-limits is not
    retried, since the registry refuses until its window has passed: Docker Hub counts pulls over 6 hours,
    https://docs.docker.com/docker-hub/usage/pulls/; the script says so and stops), runs `docker rm -f` on
    a stale container (only one process may own the TPU, docs/vllm.md §4.3), then `docker run -d --name C
    --privileged --net=host --shm-size 16G -v /dev/shm:/dev/shm --log-driver gcplogs ... --env HF_TOKEN
    IMAGE vllm serve ...`
    (docs/vllm.md §4.1, §4.2): the flags, command and log options of `ops.vllm.dockerrun`, which the bot's
    own `docker run` (/vllm start, /vllm restart) uses too.

    vLLM's output goes to Cloud Logging by construction: Docker's gcplogs driver writes every line to the
    log `gcplogs-docker-driver` of the project (`--log-opt gcp-project=P`), with the container labels
    `tpu_node` and `tpu_worker_id` (read from the TPU VM's `tpu-env` metadata attribute) copied into
    `jsonPayload.container.metadata` (`--log-opt labels=...`), which is what `ops.gcp.cloudlogs.build_filter`
    reads. `--log-opt cache-disabled=false` keeps Docker's local copy ("dual logging", Docker Engine
    20.10+), so `docker logs` (the bot's /vllm logs over SSH) keeps working even where the daemon turned the
    cache off. No `env`/`env-regex` option is given: it would copy environment variables, the token among
    them, into every entry. Should the driver refuse to start (no Cloud Logging access for the VM's service
    account: roles/logging.logWriter), the script says so in its log and starts vLLM with Docker's default
    driver, so serving does not depend on logging (docs/vllm.md §4.4).

    Token hygiene: the token never appears in the script; tracing is off (`set +x`), the variable is never
    echoed or logged, and docker gets it through `--env HF_TOKEN` (value taken from the environment of the
    docker CLI, not the command line, so it is absent from `ps`); it is unset right after. It is visible to
    root via `docker inspect`, as any container environment variable is.

    Args:
        cfg: a validated `StartupConfig`.

    Returns:
        The script text, starting with `#!/bin/bash`.

    Raises:
        BadInput: `cfg` is not a `StartupConfig` (its fields are validated on construction).
    """
    if not isinstance(cfg, StartupConfig):
        raise BadInput("startup_script needs a StartupConfig", "build one with StartupConfig(project=...)")
    name = _q(cfg.container_name)
    image = _q(cfg.image)
    hf_token = _secret_block(
        "HF_TOKEN",
        cfg.hf_token_secret,
        cfg.project,
        "Read the Hugging Face token on the VM. It is never printed, and not exported before the container "
        "starts.",
        "no Hugging Face token: check the secret and the VM service account's secretAccessor role",
    )
    api_key = (
        ""
        if cfg.api_key_secret is None
        else _secret_block(
            "VLLM_API_KEY",
            cfg.api_key_secret,
            cfg.project,
            "Read the vLLM API key on the VM; the bot reads the same secret and sends it as a Bearer key.",
            "no vLLM API key: refusing to serve without it (check the secret and the secretAccessor role)",
        )
    )
    argv = cfg.vllm_argv()
    head = [["docker", "run", "-d", "--name", cfg.container_name], list(RUN_FLAGS)]
    tail = [
        ["--env", "HF_TOKEN", "--env", "VLLM_API_KEY"] if cfg.api_key_secret else ["--env", "HF_TOKEN"],
        [cfg.image],
        argv[:3],
    ]
    flags = argv[3:]
    while flags:
        takes_value = len(flags) > 1 and not flags[1].startswith("--")
        tail.append(flags[: 2 if takes_value else 1])
        flags = flags[2 if takes_value else 1 :]
    # The bot's own docker run's options (ops.vllm.dockerrun); the node and worker are the shell variables
    # below, checked against the kinds' patterns and double-quoted: expanded, never split or globbed.
    driver, _, labels = GCPLOGS_OPTIONS.format(
        project=_q(cfg.project),
        node_label=NODE_LABEL,
        worker_label=WORKER_LABEL,
        node='"$node_id"',
        worker='"$worker_id"',
    ).partition(" --label ")
    logging = [driver, "--label " + labels]
    joined = [shlex.join(line) for line in head], [shlex.join(line) for line in tail]
    serve = " \\\n    ".join([*joined[0], *logging, *joined[1]])
    serve_plain = " \\\n    ".join([*joined[0], *joined[1]])
    return f"""#!/bin/bash
# Generated by tpu-chatops (ops.vllm.deploy.startup_script). Runs as root on every boot of the TPU VM.
# Serves a Hugging Face model with vLLM in docker on port {cfg.port}.
set -uo pipefail
set +x  # never trace: the Hugging Face token passes through a variable below
umask 077

log() {{ echo "tpu-chatops startup: $*"; }}

for tool in docker gcloud curl; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    log "$tool not found on this image; aborting"
    exit 1
  fi
done

{hf_token}
{api_key}
for attempt in 1 2 3; do
  if pulled=$(docker pull {image} 2>&1); then
    printf '%s\n' "$pulled"
    break
  fi
  printf '%s\n' "$pulled"
  case "$pulled" in
    *toomanyrequests*|*"429 Too Many Requests"*)
      log "docker pull rate-limited: the registry refuses pulls until its window has passed (Docker Hub" \
        "counts pulls over 6 hours), so it is not retried now; start vLLM once it has (/vllm start)"
      exit 1
      ;;
  esac
  log "docker pull failed (attempt $attempt of 3)"
  sleep 30
done

# Only one process can own the TPU: remove a stale container first.
docker rm -f {name} >/dev/null 2>&1 || true

# vLLM's output goes to Cloud Logging through Docker's gcplogs driver (log {CONTAINER_LOG_ID}), labelled
# with this TPU node and worker as the TPU runtime publishes them (metadata attribute tpu-env).
tpu_env="$({TPU_ENV_READ})" || tpu_env=""
node_id="$(printf '%s\\n' "$tpu_env" | sed -n "s/^NODE_ID: '\\(.*\\)'$/\\1/p" | head -n 1)"
worker_id="$(printf '%s\\n' "$tpu_env" | sed -n "s/^WORKER_ID: '\\(.*\\)'$/\\1/p" | head -n 1)"
if ! [[ "$node_id" =~ {RESOURCE_ID.pattern} ]]; then
  log "no TPU node id in the tpu-env metadata: vLLM's Cloud Logging entries are labelled" \\
    "{NODE_LABEL}={UNKNOWN_NODE}"
  node_id={UNKNOWN_NODE}
fi
if ! [[ "$worker_id" =~ ^[0-9]{{1,4}}$ ]]; then
  worker_id=0
fi

export HF_TOKEN{" VLLM_API_KEY" if cfg.api_key_secret else ""}
{serve}
status=$?
if [ "$status" -ne 0 ]; then
  log "docker run with the gcplogs log driver failed (status $status); if the VM's service account lacks" \\
    "roles/logging.logWriter, grant it. Starting vLLM with Docker's default log driver: its output reaches" \\
    "docker logs only, not Cloud Logging"
  docker rm -f {name} >/dev/null 2>&1 || true
  {serve_plain}
  status=$?
fi
unset HF_TOKEN{" VLLM_API_KEY" if cfg.api_key_secret else ""}
if [ "$status" -ne 0 ]; then
  log "docker run failed with status $status"
  exit "$status"
fi
log "container" {name} "started; vLLM listens on port {cfg.port} once 'Application startup complete.'"
"""


def _duration(value: timedelta, what: str) -> str:
    seconds = value.total_seconds()
    if seconds <= 0 or seconds != int(seconds):
        raise BadInput(f"invalid {what}: {value}", "give a positive whole number of seconds")
    total = int(seconds)
    if total % 3600 == 0:
        return f"{total // 3600}h"
    if total % 60 == 0:
        return f"{total // 60}m"
    return f"{total}s"


def gcloud_command(
    name: str,
    zone: str,
    project: str,
    accelerator_type: str,
    runtime_version: str,
    provisioning_model: str,
    max_run_duration: timedelta | None = None,
    valid_until: timedelta | datetime | None = None,
    *,
    node_id: str | None = None,
    startup_script_file: str = "startup.sh",
) -> str:
    """The `gcloud alpha compute tpus queued-resources create` command equivalent to a create request.

    Flag -> API field (v2alpha1) mapping, from google-cloud-sdk 578.0.0 (docs/google-apis.md §5):
    `--node-id` -> tpu.nodeSpec[0].nodeId; `--accelerator-type` -> node.acceleratorType; `--runtime-version`
    -> node.runtimeVersion; `--metadata-from-file=startup-script=F` -> node.metadata["startup-script"];
    `--provisioning-model=flex-start` -> provisioningModel FLEX_START with `--max-run-duration` ->
    runDuration.maxRunDuration; `--provisioning-model=spot` -> SPOT plus `spot: {}` (used instead of `--spot`,
    whose hook overwrites provisioningModel with STANDARD); `--provisioning-model=standard` -> STANDARD
    (on-demand; also gcloud's default); `--reserved` -> guaranteed.reserved = true;
    `--valid-until-duration` / `--valid-until-time` -> queueingPolicy.validUntilDuration / validUntilTime.
    Docs: https://cloud.google.com/tpu/docs/queued-resources,
    https://cloud.google.com/tpu/docs/request-using-flex-start

    Args:
        name: queued-resource id (RFC 1035 label), e.g. "vllm-gemma4-qr".
        zone: e.g. "us-east5-a".
        project: GCP project id.
        accelerator_type: e.g. "v6e-8".
        runtime_version: e.g. "v2-alpha-tpuv6e".
        provisioning_model: one of `PROVISIONING_MODELS`: "flex-start", "spot", "on-demand", "reserved".
        max_run_duration: required for flex-start (at most 7 days, whole seconds); rejected otherwise.
        valid_until: queueing deadline: a timedelta (`--valid-until-duration`) or an aware datetime
            (`--valid-until-time`, RFC 3339 UTC); None for no deadline.
        node_id: the node id; default f"{name}-node" as in the reference project.
        startup_script_file: local path of the startup script (see `startup_script`).

    Returns:
        One shell command, continued over lines with trailing backslashes, every value shell-quoted.

    Raises:
        BadInput: any argument is invalid, or max_run_duration is missing for flex-start / given otherwise.
    """
    _check(name, "queued resource id")
    node = node_id if node_id is not None else f"{name}-node"
    _check(node, "node id")
    check_zone(zone)
    _valid(project, "project", "GCP project id")
    _check(accelerator_type, "accelerator type")
    _check(runtime_version, "runtime version")
    _check(startup_script_file, "startup script path")
    if provisioning_model not in PROVISIONING_MODELS:
        raise BadInput(
            f"unknown provisioning model {provisioning_model!r}", f"known: {', '.join(PROVISIONING_MODELS)}"
        )
    args = [
        ["gcloud", "alpha", "compute", "tpus", "queued-resources", "create", name],
        [f"--zone={zone}", f"--project={project}"],
        [f"--node-id={node}", f"--accelerator-type={accelerator_type}"],
        [f"--runtime-version={runtime_version}"],
        [f"--metadata-from-file=startup-script={startup_script_file}"],
    ]
    if provisioning_model == "flex-start":
        if max_run_duration is None:
            raise BadInput("flex-start needs a max run duration", "e.g. 4h; at most 7 days")
        if max_run_duration > FLEX_START_MAX_RUN:
            raise BadInput(
                f"max run duration {max_run_duration} exceeds 7 days", "flex-start allows at most 7d"
            )
        args.append(
            [
                "--provisioning-model=flex-start",
                f"--max-run-duration={_duration(max_run_duration, 'duration')}",
            ]
        )
    else:
        if max_run_duration is not None:
            raise BadInput(
                f"a max run duration applies only to flex-start, not {provisioning_model}",
                "drop the duration or use flex-start",
            )
        args.append(
            {
                "spot": ["--provisioning-model=spot"],
                "on-demand": ["--provisioning-model=standard"],
                "reserved": ["--reserved"],
            }[provisioning_model]
        )
    if isinstance(valid_until, timedelta):
        args.append([f"--valid-until-duration={_duration(valid_until, 'valid-until duration')}"])
    elif isinstance(valid_until, datetime):
        if valid_until.tzinfo is None:
            raise BadInput("valid_until must be timezone-aware", "use e.g. datetime(..., tzinfo=UTC)")
        stamp = rfc3339(valid_until)
        args.append([f"--valid-until-time={stamp}"])
    elif valid_until is not None:
        raise BadInput(f"invalid valid_until {valid_until!r}", "give a timedelta or an aware datetime")
    return " \\\n  ".join(shlex.join(line) for line in args)


def gke_manifest(cfg: StartupConfig, accelerator_type: str, *, hf_token_key: str = "hf_api_token") -> str:  # noqa: S107
    """A Deployment + Service (YAML, two documents) serving `cfg.model` with vLLM on a GKE TPU node pool.

    The pod selects the node pool with `cloud.google.com/gke-tpu-accelerator` and
    `cloud.google.com/gke-tpu-topology` (v6e-8: tpu-v6e-slice, 2x4) and requests `google.com/tpu: <chips>`
    (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus). Only single-host slices are
    supported (vLLM on GKE TPUs is single-host). The container runs the explicit `vllm serve ...` command
    (docs/vllm.md §4.2), mounts a 16Gi memory-backed /dev/shm, and gets HF_TOKEN from the Kubernetes Secret
    `cfg.hf_token_secret`, key `hf_token_key`: create it out of band, e.g.
    `kubectl create secret generic hf-token --from-literal=hf_api_token=...`. No token value appears here.
    A startup probe on GET /health allows 30 minutes for weight download and XLA compilation.

    Args:
        cfg: a validated `StartupConfig`; `container_name` names the Deployment and Service and must be a
            DNS-1123 label, `hf_token_secret` must be a DNS-1123 subdomain.
        accelerator_type: one of v6e-1, v6e-4, v6e-8, v5litepod-1, v5litepod-4, v5litepod-8.
        hf_token_key: the key inside the Secret.

    Returns:
        YAML text (yaml.safe_dump_all of a Deployment and a Service).

    Raises:
        BadInput: unsupported accelerator type, or a name that is not a valid Kubernetes name.
    """
    if not isinstance(cfg, StartupConfig):
        raise BadInput("gke_manifest needs a StartupConfig", "build one with StartupConfig(project=...)")
    shape = _GKE_SLICES.get(accelerator_type)
    if shape is None:
        raise BadInput(
            f"no single-host GKE TPU slice for {accelerator_type!r}", f"supported: {', '.join(_GKE_SLICES)}"
        )
    accelerator, topology, n_chips = shape
    app = _check(cfg.container_name, "Kubernetes name (container_name)")
    secret = _check(cfg.hf_token_secret, "Kubernetes Secret name")
    _check(hf_token_key, "Kubernetes Secret key")
    argv = cfg.vllm_argv()
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": app, "labels": {"app": app}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {
                    "nodeSelector": {
                        "cloud.google.com/gke-tpu-accelerator": accelerator,
                        "cloud.google.com/gke-tpu-topology": topology,
                    },
                    "containers": [
                        {
                            "name": "vllm",
                            "image": cfg.image,
                            "command": argv[:2],
                            "args": argv[2:],
                            "env": [
                                {
                                    "name": "HF_TOKEN",
                                    "valueFrom": {"secretKeyRef": {"name": secret, "key": hf_token_key}},
                                }
                            ],
                            "ports": [{"name": "http", "containerPort": cfg.port}],
                            "resources": {
                                "requests": {"google.com/tpu": n_chips},
                                "limits": {"google.com/tpu": n_chips},
                            },
                            "startupProbe": {
                                "httpGet": {"path": "/health", "port": cfg.port},
                                "periodSeconds": 10,
                                "failureThreshold": 180,
                            },
                            "readinessProbe": {
                                "httpGet": {"path": "/health", "port": cfg.port},
                                "periodSeconds": 10,
                            },
                            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],  # noqa: S108
                        }
                    ],
                    "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}],
                },
            },
        },
    }
    service: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": app, "labels": {"app": app}},
        "spec": {
            "type": "ClusterIP",
            "selector": {"app": app},
            "ports": [{"name": "http", "port": cfg.port, "targetPort": cfg.port, "protocol": "TCP"}],
        },
    }
    return yaml.safe_dump_all([deployment, service], sort_keys=False)
