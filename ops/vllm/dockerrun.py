"""How the vLLM container is run on the TPU VM: the `docker run` flags, the `vllm serve` command, the log
driver's options and labels, and where the VM says which TPU node and worker it is.

One home for the two places that run the container, so they cannot drift: the bot's own `docker run`
(`ops.vllm.ssh.TEMPLATES`: `/vllm start`, `/vllm restart`) and the startup script (`ops.vllm.deploy`). The
texts are command templates: `{name}` placeholders that `ops.vllm.ssh.RemoteHost.render` fills with values
checked by their kind (`ops.vllm.ssh.KINDS`) and `shlex.quote`d, and that the startup script fills with
values it checked and quoted the same way (or with its own shell variables, double-quoted).
Sources: docs/vllm.md §4.1 (the recipe's docker run), §4.2 (an explicit `vllm serve` command) and §4.4
(where the output goes); docs/google-apis.md §4 (the gcplogs driver and the tpu-env metadata attribute).
This module loads no Google client: `ops.vllm.ssh`, which `python -m bot manifest` loads, reads it.
"""

from __future__ import annotations

from ops.linear import linear

__all__ = [
    "GCPLOGS_ARGS",
    "GCPLOGS_OPTIONS",
    "RUN_FLAGS",
    "TPU_ENV_READ",
    "UNKNOWN_NODE",
    "VLLM_SERVE",
    "VLLM_SERVE_ARGS",
    "tpu_env_values",
]

RUN_FLAGS = ("--privileged", "--net=host", "--shm-size", "16G", "-v", "/dev/shm:/dev/shm")  # noqa: S108
"""The container's flags after `docker run -d --name NAME` (docs/vllm.md §4.1): the TPU devices, the host
network (vLLM listens on the VM's port) and a 16 GB /dev/shm."""

VLLM_SERVE = (
    "vllm serve {model} --tensor-parallel-size {tensor_parallel_size} --max-model-len {max_model_len} "
    "--host 0.0.0.0 --port {port} --enable-auto-tool-choice --tool-call-parser gemma4 "
    "--reasoning-parser gemma4 --disable_chunked_mm_input"
)
"""The container's command (docs/vllm.md §4.2: explicit, so it works with or without the image's
entrypoint.sh; the tool and reasoning parsers: §1.6)."""
VLLM_SERVE_ARGS = {name: name for name in ("model", "tensor_parallel_size", "max_model_len", "port")}
"""The placeholders of `VLLM_SERVE`, each with its kind in `ops.vllm.ssh.KINDS`."""

GCPLOGS_OPTIONS = (
    "--log-driver gcplogs --log-opt gcp-project={project} --log-opt labels={node_label},{worker_label} "
    "--log-opt cache-disabled=false --label {node_label}={node} --label {worker_label}={worker}"
)
"""The `docker run` options that send the container's output to Cloud Logging.

Docker's gcplogs driver writes every line to the log `gcplogs-docker-driver` of `{project}`
(https://docs.docker.com/engine/logging/drivers/gcplogs/), and copies the container labels named by
`--log-opt labels=` into each entry's `jsonPayload.container.metadata`: the TPU node and worker, which
`ops.gcp.cloudlogs` filters on. The label names are placeholders too, filled with `ops.gcp.cloudlogs`'s
`NODE_LABEL` and `WORKER_LABEL`, so that this module loads no Google client. `cache-disabled=false` keeps
Docker's local copy, so `docker logs` (/vllm logs, the diagnosis) keeps working with a driver that cannot be
read back (dual logging, Docker Engine 20.10+: https://docs.docker.com/engine/logging/dual-logging/). No
`env`, `env-regex` or `gcp-log-cmd` option: they would copy the environment (the Hugging Face token) or the
command into every entry."""
GCPLOGS_ARGS = {
    "project": "project",
    "node_label": "label",
    "worker_label": "label",
    "node": "node",
    "worker": "worker",
}
"""The placeholders of `GCPLOGS_OPTIONS`, each with its kind in `ops.vllm.ssh.KINDS`."""

TPU_ENV_READ = (
    "curl -sf --max-time 10 -H 'Metadata-Flavor: Google' "
    "http://metadata.google.internal/computeMetadata/v1/instance/attributes/tpu-env"
)
"""The command that prints the TPU VM's `tpu-env` instance metadata attribute (lines such as
`NODE_ID: 'gemma4-qr-node'` and `WORKER_ID: '0'`; the attribute torch_xla reads in
`torch_xla/_internal/tpu.py`, docs/google-apis.md §4). Exit 22 (curl's HTTP error) when the VM has no such
attribute: it is not a TPU VM."""
UNKNOWN_NODE = "unknown"
"""The node label of a container whose VM names no TPU node in its tpu-env attribute."""

_TPU_ENV_LINE = linear(r"^([A-Z][A-Z0-9_]*): '([^']*)'$")


def tpu_env_values(text: str) -> dict[str, str]:
    """The values of a `tpu-env` attribute's text (`TPU_ENV_READ`'s output), the first of each key, as
    the startup script's `sed -n "s/^NODE_ID: '\\(.*\\)'$/\\1/p" | head -n 1` reads them.

    Args:
        text: e.g. "ACCELERATOR_TYPE: 'v6e-8'\\nNODE_ID: 'gemma4-qr-node'\\nWORKER_ID: '0'\\n".

    Returns:
        e.g. {"ACCELERATOR_TYPE": "v6e-8", "NODE_ID": "gemma4-qr-node", "WORKER_ID": "0"}; lines of
        another shape are skipped. The values are not checked: check them by their kind before use.
    """
    values: dict[str, str] = {}
    for line in text.splitlines():
        found = _TPU_ENV_LINE.fullmatch(line)
        if found is not None:
            values.setdefault(found[1], found[2])
    return values
