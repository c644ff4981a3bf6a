"""ops.vllm.ssh and ops.vllm.container against a REAL OpenSSH server (tests/sshd.py): host-key checking,
errors,
and shell injection.

Injection tests assert on what the remote side received: the command string sshd got
($SSH_ORIGINAL_COMMAND, logged by a ForceCommand wrapper) and the argv the fake `docker`/`grep` programs got.
"""

from __future__ import annotations

import base64
import shlex
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ops.errors import BackendTimeout, BackendUnavailable, BadInput, OpsError, PermissionDenied
from ops.vllm.container import VllmContainer, VllmSpec
from ops.vllm.dockerrun import TPU_ENV_READ
from ops.vllm.ssh import TEMPLATES, RemoteHost
from sim.host import generate_ed25519_key
from tests.sshd import OpenSSHServer


@pytest.fixture(scope="module")
def sshd() -> Iterator[OpenSSHServer]:
    with OpenSSHServer() as server:
        yield server


@pytest.fixture(scope="module")
def remote(sshd: OpenSSHServer) -> Iterator[RemoteHost]:
    host = RemoteHost(
        "127.0.0.1",
        sshd.port,
        user=sshd.user,
        key_path=str(sshd.client_key_path),
        known_hosts_path=str(sshd.known_hosts()),
        connect_timeout_s=5,
        command_timeout_s=20,
    )
    yield host
    host.close()


def _other_key_b64() -> str:
    return generate_ed25519_key().get_base64()


def test_connects_with_host_key_checking_and_runs_a_template(sshd: OpenSSHServer, remote: RemoteHost) -> None:
    result = remote.run("journalctl", unit="docker.service", tail=5)
    assert result.exit_status == 0
    assert result.stdout == "-- No entries --\n"
    assert result.duration_s > 0
    assert sshd.received()[-1] == "journalctl -u docker.service -n 5 --no-pager"
    assert sshd.argv()[-1] == ["journalctl", "-u", "docker.service", "-n", "5", "--no-pager"]


def test_pinned_host_key_works_without_known_hosts(sshd: OpenSSHServer) -> None:
    with RemoteHost(
        "127.0.0.1",
        sshd.port,
        user=sshd.user,
        pkey=sshd.client_key,
        pinned_host_keys={sshd.host_key_type: sshd.host_key_b64},
    ) as host:
        assert host.run("docker_start", container="vllm").exit_status == 0
    assert sshd.argv()[-1] == ["docker", "start", "--", "vllm"]


def _server_fingerprint(sshd: OpenSSHServer) -> str:
    import paramiko

    key = paramiko.PKey.from_type_string(sshd.host_key_type, base64.b64decode(sshd.host_key_b64))
    return str(key.fingerprint)


def test_changed_host_key_is_refused_with_a_clear_message(sshd: OpenSSHServer, tmp_path: Path) -> None:
    before = len(sshd.received())
    known = sshd.known_hosts(tmp_path / "known_hosts", key_b64=_other_key_b64())
    host = RemoteHost(
        "127.0.0.1",
        sshd.port,
        user=sshd.user,
        key_path=str(sshd.client_key_path),
        known_hosts_path=str(known),
    )
    with pytest.raises(PermissionDenied) as info:
        host.run("docker_inspect", container="vllm")
    err = info.value
    assert f"127.0.0.1:{sshd.port}" in err.message
    assert "CHANGED" in err.message
    assert _server_fingerprint(sshd) in err.message  # the offered key's SHA256 fingerprint
    assert err.message.count("SHA256:") == 2  # offered and trusted
    assert "known_hosts" in err.hint and "verify" in err.hint
    assert len(sshd.received()) == before  # nothing was sent


def test_unknown_host_key_is_refused(sshd: OpenSSHServer, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    host = RemoteHost(
        "127.0.0.1", sshd.port, user=sshd.user, pkey=sshd.client_key, known_hosts_path=str(empty)
    )
    with pytest.raises(PermissionDenied) as info:
        host.run("docker_inspect", container="vllm")
    assert "not known" in info.value.message
    assert _server_fingerprint(sshd) in info.value.message
    assert f"127.0.0.1:{sshd.port}" in info.value.message
    assert "known_hosts" in info.value.hint


def test_pinned_key_mismatch_is_refused(sshd: OpenSSHServer) -> None:
    host = RemoteHost(
        "127.0.0.1",
        sshd.port,
        user=sshd.user,
        pkey=sshd.client_key,
        pinned_host_keys={"ssh-ed25519": _other_key_b64()},
    )
    with pytest.raises(PermissionDenied, match="CHANGED"):
        host.run("docker_inspect", container="vllm")


def test_authentication_failure_is_permission_denied_without_key_material(sshd: OpenSSHServer) -> None:
    wrong = generate_ed25519_key()
    host = RemoteHost(
        "127.0.0.1", sshd.port, user=sshd.user, pkey=wrong, known_hosts_path=str(sshd.known_hosts())
    )
    with pytest.raises(PermissionDenied) as info:
        host.run("docker_inspect", container="vllm")
    text = str(info.value)
    assert "authentication refused" in text
    private = Path(sshd.client_key_path).read_text()
    for line in private.splitlines()[1:-1]:
        assert line not in text
    assert wrong.get_base64() not in text


def test_connection_refused_is_backend_unavailable(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    host = RemoteHost(
        "127.0.0.1",
        port,
        user="x",
        pkey=generate_ed25519_key(),
        pinned_host_keys={"ssh-ed25519": _other_key_b64()},
    )
    with pytest.raises(BackendUnavailable, match=rf"SSH to 127\.0\.0\.1:{port} refused"):
        host.run("docker_inspect", container="vllm")


def test_silent_server_is_backend_timeout() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    accepted: list[socket.socket] = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    thread.start()
    host = RemoteHost(
        "127.0.0.1",
        listener.getsockname()[1],
        user="x",
        pkey=generate_ed25519_key(),
        pinned_host_keys={"ssh-ed25519": _other_key_b64()},
        connect_timeout_s=0.5,
    )
    try:
        with pytest.raises(BackendTimeout):
            host.run("docker_inspect", container="vllm")
    finally:
        for conn in accepted:
            conn.close()
        listener.close()


def test_command_timeout_is_backend_timeout(sshd: OpenSSHServer, remote: RemoteHost) -> None:
    # The fake journalctl takes ~0.1 s to start (python); a 1 ms limit cannot be met.
    with pytest.raises(BackendTimeout, match="did not finish"):
        remote.run("journalctl", unit="docker.service", tail=1, timeout_s=0.001)
    assert remote.run("journalctl", unit="docker.service", tail=1).exit_status == 0  # reconnects if needed


# -- injection --------------------------------------------------------------------------------------------


def _payloads(tmp: Path) -> list[str]:
    canary, victim = tmp / "canary", tmp / "victim"
    return [
        f"x; rm -rf {victim}",
        f"$(touch {canary})",
        f"`touch {canary}`",
        f"x' ; touch {canary}; echo '",
        f'say "hi" && touch {canary}',
        f"a | touch {canary}",
        "${PATH} $HOME",
        "-e --help",
        "back\\slash *",
        "it's; > /tmp/x",
    ]


def test_grep_text_arrives_as_one_literal_argument(
    sshd: OpenSSHServer, remote: RemoteHost, tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    payloads = _payloads(tmp_path)
    sshd.set_container_log("".join(f"line {i}: {p}\n" for i, p in enumerate(payloads)) + "unrelated line\n")
    container = VllmContainer(remote, "vllm")
    for i, payload in enumerate(payloads):
        before = len(sshd.received())
        out = container.logs(tail=50, grep=payload)
        assert out == f"line {i}: {payload}\n", payload  # grep matched the literal text only
        received = sshd.received()[before:]
        assert received[-1].endswith("| grep -F -e " + shlex.quote(payload))
        grep_argv = [a for a in sshd.argv() if a[0] == "grep"][-1]
        assert grep_argv == ["grep", "-F", "-e", payload]
    assert victim.is_dir(), "rm -rf was executed"
    assert not (tmp_path / "canary").exists(), "an injected command was executed"


def test_metacharacters_in_container_commands_are_never_sent(sshd: OpenSSHServer, remote: RemoteHost) -> None:
    before = len(sshd.received())
    bad_containers = [
        "x; rm -rf /",
        "$(id)",
        "`id`",
        "a'b",
        'a"b',
        "vllm\nid",
        "-rm",
        "",
        "a" * 129,
        "vllm id",
    ]
    for name in bad_containers:
        for template in ("docker_inspect", "docker_start", "docker_stop", "docker_rm_force"):
            args: dict[str, Any] = {"container": name}
            if template == "docker_stop":
                args["stop_timeout_s"] = 10
            with pytest.raises(BadInput):
                remote.run(template, **args)
    bad: list[tuple[str, dict[str, Any]]] = [
        ("docker_logs", {"container": "vllm", "tail": 0}),
        ("docker_logs", {"container": "vllm", "tail": 10001}),
        ("docker_logs", {"container": "vllm", "tail": "5; id"}),
        ("docker_logs", {"container": "vllm", "tail": True}),
        ("docker_logs_since", {"container": "vllm", "tail": 5, "since": "10m; id"}),
        ("docker_logs_since", {"container": "vllm", "tail": 5, "since": "2d"}),
        ("docker_logs_grep", {"container": "vllm", "tail": 5, "text": "a\nb"}),
        ("docker_logs_grep", {"container": "vllm", "tail": 5, "text": "a\rb"}),
        ("docker_logs_grep", {"container": "vllm", "tail": 5, "text": "x" * 201}),
        ("docker_logs_grep", {"container": "vllm", "tail": 5, "text": ""}),
        ("journalctl", {"unit": "docker; id", "tail": 5}),
        ("journalctl", {"unit": "-f", "tail": 5}),
        ("docker_logs", {"container": "vllm", "tail": 5, "extra": "x"}),
        ("no_such_template", {}),
    ]
    for template, args in bad:
        with pytest.raises(BadInput):
            remote.run(template, **args)
    spec_bad = [
        VllmSpec(image="vllm/vllm-tpu:gemma4; id"),
        VllmSpec(image="vllm/vllm-tpu:$(id)"),
        VllmSpec(model="google/gemma$(id)"),
        VllmSpec(model="../../etc/passwd"),
        VllmSpec(hf_token_secret="hf-token --project=other"),
        VllmSpec(tensor_parallel_size=0),
        VllmSpec(max_model_len=-1),
        VllmSpec(port=70000),
    ]
    container = VllmContainer(remote, "vllm")
    for spec in spec_bad:
        with pytest.raises(BadInput):
            container._run(spec)
    with pytest.raises(BadInput):
        VllmContainer(remote, "x; id")
    assert len(sshd.received()) == before, "an invalid command reached the server"


def test_docker_run_gets_literal_flags_and_the_token_only_on_the_vm(
    sshd: OpenSSHServer, remote: RemoteHost
) -> None:
    container = VllmContainer(remote, "vllm")
    before_calls = len(sshd.calls())
    before_received = len(sshd.received())
    image = "vllm/vllm-tpu:nightly-20260604-2aaa59e-4f423bd"
    outcome = container.restart(VllmSpec(image=image, port=8001), settle_s=0)
    assert outcome.replaced and outcome.pulled and outcome.status.running
    received = sshd.received()[before_received:]
    changes = [r for r in received if not r.startswith("docker inspect --type container")]
    assert changes[:4] == [
        f"docker image inspect -- {image}",
        f"docker pull -- {image}",  # while the old container still serves
        "docker stop --time 30 -- vllm",
        "docker rename -- vllm vllm-previous",
    ]
    assert changes[4].startswith(
        'HF_TOKEN="$(gcloud secrets versions access latest --secret=hf-token)" || exit 3;'
    )
    assert changes[5:] == ["docker rm -f -- vllm-previous"]
    calls = sshd.calls()[before_calls:]
    argvs = [c.argv for c in calls]
    assert ["gcloud", "secrets", "versions", "access", "latest", "--secret=hf-token"] in argvs
    run = next(c for c in calls if c.argv[:2] == ["docker", "run"])
    assert run.hf_token is True  # reached docker through the environment...
    assert run.argv == [
        "docker", "run", "-d", "--name", "vllm", "--privileged", "--net=host", "--shm-size", "16G",
        "-v", "/dev/shm:/dev/shm", "-e", "HF_TOKEN", "--", "vllm/vllm-tpu:nightly-20260604-2aaa59e-4f423bd",
        "vllm", "serve", "google/gemma-4-31B-it", "--tensor-parallel-size", "8", "--max-model-len", "16384",
        "--host", "0.0.0.0", "--port", "8001", "--enable-auto-tool-choice", "--tool-call-parser", "gemma4",
        "--reasoning-parser", "gemma4", "--disable_chunked_mm_input",
    ]  # fmt: skip
    # ...and never through the bot: not in any command string or argv
    assert all("hf_FAKE_TOKEN" not in r for r in received)
    assert all("hf_FAKE_TOKEN" not in " ".join(a) for a in argvs)


def test_docker_run_with_the_gcplogs_driver_gets_its_options_as_literal_words(
    sshd: OpenSSHServer, remote: RemoteHost
) -> None:
    """With a project, the bot reads the VM's tpu-env attribute, then runs the container with the gcplogs
    driver, the project and the node and worker it read: each one word through real bash."""
    container = VllmContainer(remote, "vllm")
    before = len(sshd.calls())
    outcome = container.restart(VllmSpec(project="demo-project", port=8001), settle_s=0)
    assert outcome.replaced
    calls = sshd.calls()[before:]
    assert [c.argv for c in calls if c.argv[0] == "curl"] == [shlex.split(TPU_ENV_READ)]
    run = next(c for c in calls if c.argv[:2] == ["docker", "run"])
    assert run.argv[: run.argv.index("-e")] == [
        "docker", "run", "-d", "--name", "vllm", "--privileged", "--net=host", "--shm-size", "16G",
        "-v", "/dev/shm:/dev/shm", "--log-driver", "gcplogs", "--log-opt", "gcp-project=demo-project",
        "--log-opt", "labels=tpu_node,tpu_worker_id", "--log-opt", "cache-disabled=false",
        "--label", "tpu_node=gemma4-qr-node", "--label", "tpu_worker_id=0",
    ]  # fmt: skip
    assert run.hf_token is True
    assert container.log_route is not None and container.log_route.cloud_logging


def test_restart_to_a_tag_that_does_not_exist_stops_nothing_and_shows_dockers_error(
    sshd: OpenSSHServer, remote: RemoteHost
) -> None:
    """The issue's repro over a real sshd and bash: the pull is refused before the running container is
    touched, and the error is docker's own line, not its usage hint."""
    before = len(sshd.received())
    with pytest.raises(OpsError) as refused:
        VllmContainer(remote, "vllm").restart(VllmSpec(image="vllm/vllm-tpu:does-not-exist"), settle_s=0)
    assert refused.value.message == (
        "docker pull vllm/vllm-tpu:does-not-exist on 127.0.0.1 failed (exit 1): Error response from daemon: "
        "manifest for vllm/vllm-tpu:does-not-exist not found: manifest unknown: manifest unknown; "
        "vllm was not touched"
    )
    assert "does not exist in the registry" in refused.value.hint
    assert sshd.received()[before:] == [
        "docker image inspect -- vllm/vllm-tpu:does-not-exist",
        "docker pull -- vllm/vllm-tpu:does-not-exist",
    ]


def test_bench_template_argv(sshd: OpenSSHServer, remote: RemoteHost) -> None:
    result = remote.run(
        "vllm_bench_serve",
        container="vllm",
        model="google/gemma-4-31B-it",
        num_prompts=100,
        input_len=1024,
        output_len=128,
        max_concurrency=16,
        port=8000,
    )
    assert result.exit_status == 0
    assert sshd.argv()[-1] == [
        "docker", "exec", "--", "vllm", "vllm", "bench", "serve", "--backend", "vllm", "--model",
        "google/gemma-4-31B-it", "--dataset-name", "random", "--num-prompts", "100",
        "--random-input-len", "1024", "--random-output-len", "128", "--max-concurrency", "16",
        "--port", "8000",
    ]  # fmt: skip


def test_every_template_quotes_every_argument() -> None:
    for name, template in TEMPLATES.items():
        for arg in template.args:
            assert "{" + arg + "}" in template.text, (name, arg)
