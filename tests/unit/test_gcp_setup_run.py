"""deploy/gcp-setup.sh run end to end with `gcloud` replaced by a recorder on PATH.

No Google project is reachable from a test, so what runs here is the script's own logic, not Google: the
recorder answers `describe`/`list` as an empty project or as one where everything exists, and logs each
command. An empty project gets each resource created once; a finished one gets no create at all (describe
before create); no secret value reaches the script's output; bad input stops with one line.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
from pathlib import Path

import pytest

from ops.gcp import iam

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "gcp-setup.sh"

RECORDER = r"""#!/usr/bin/env bash
# A stand-in for gcloud: logs its arguments (one line each, shell-quoted), keeps what it read on stdin, and
# answers describe/list as an empty project or a finished one.
n=$(wc -l < "$RECORDER_STATE/log")
{ printf '%q ' "$@"; printf '\n'; } >> "$RECORDER_STATE/log"
for arg in "$@"; do [[ "$arg" == --data-file=- ]] && cat > "$RECORDER_STATE/stdin.$n"; done
[[ -n "${CLOUDSDK_CORE_DISABLE_FILE_LOGGING:-}" ]] && touch "$RECORDER_STATE/nolog.$n"
full=$([[ "$RECORDER_MODE" == full ]] && echo 1)
case " $* " in
*" describe "*) [[ -n "$full" ]] || exit 1; [[ "$1 $2" == "iam roles" ]] && echo False ;;
" secrets versions list "*) [[ -n "$full" ]] && echo projects/p/secrets/s/versions/1 ;;
" sql users list "*) [[ -n "$full" ]] && echo bot ;;
esac
exit 0
"""


def _run(
    tmp_path: Path, mode: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, object]]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    recorder = bin_dir / "gcloud"
    recorder.write_text(RECORDER)
    recorder.chmod(recorder.stat().st_mode | stat.S_IEXEC)
    state = tmp_path / mode
    state.mkdir()
    (state / "log").write_text("")
    full_env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "RECORDER_STATE": str(state),
        "RECORDER_MODE": mode,
        **env,
    }
    result = subprocess.run(
        ["bash", str(SCRIPT)], env=full_env, capture_output=True, text=True, timeout=120, check=False
    )
    entries: list[dict[str, object]] = []
    for n, line in enumerate((state / "log").read_text().splitlines()):
        stdin = state / f"stdin.{n}"
        entries.append(
            {
                "args": shlex.split(line),
                "stdin": stdin.read_text() if stdin.exists() else "",
                "file_logging_off": "true" if (state / f"nolog.{n}").exists() else None,
            }
        )
    return result, entries


def _commands(entries: list[dict[str, object]]) -> list[str]:
    return [shlex.join(entry["args"]) for entry in entries]  # type: ignore[arg-type]


PROJECT = {"PROJECT": "demo-project", "REGION": "us-east5"}


def test_an_empty_project_gets_everything_once(tmp_path: Path) -> None:
    result, entries = _run(tmp_path, "empty", **PROJECT)
    assert result.returncode == 0, result.stderr
    commands = _commands(entries)
    creates = [c for c in commands if " create " in f" {c} "]
    assert len(creates) == len(set(creates)), "a resource created twice"
    assert sum(c.startswith("iam service-accounts create ") for c in creates) == 2
    (role,) = [e["args"] for e in entries if e["args"][:3] == ["iam", "roles", "create"]]  # type: ignore[index]
    permissions = next(a for a in role if a.startswith("--permissions=")).split("=", 1)[1]  # type: ignore[union-attr]
    assert permissions.split(",") == iam.bot_role_permissions()
    for secret in (
        "hf-token",
        "vllm-api-key",
        "slack-bot-token",
        "state-database-url",
        "tpu-chatops-ssh-key",
    ):
        assert f"secrets create {secret} --project=demo-project --replication-policy=automatic" in commands
    assert any(c.startswith("sql instances create tpu-chatops ") for c in commands)
    # The database password goes into the secret through stdin, and gcloud's file log is off for its user.
    (url_entry,) = [
        e for e in entries if e["args"][:4] == ["secrets", "versions", "add", "state-database-url"]
    ]
    url = str(url_entry["stdin"])
    assert url.startswith("postgresql+psycopg://bot:") and url.endswith(
        "?host=/cloudsql/demo-project:us-east5:tpu-chatops"
    )
    password = url.split("bot:", 1)[1].split("@", 1)[0]
    (user,) = [e for e in entries if e["args"][:3] == ["sql", "users", "create"]]
    assert user["file_logging_off"] == "true"
    (key,) = [e for e in entries if e["args"][:4] == ["secrets", "versions", "add", "vllm-api-key"]]
    assert len(str(key["stdin"]).strip()) == 64  # openssl rand -hex 32
    for secret in (password, str(key["stdin"]).strip()):
        assert secret not in result.stdout and secret not in result.stderr
    # The wide roles are nowhere; the narrow ones are bound on one resource.
    assert not any("roles/tpu.admin" in c for c in commands)
    assert "workloadIdentityUser" not in " ".join(commands)
    assert "Next steps (docs/deploy.md)" in result.stdout


def test_a_finished_project_gets_no_create(tmp_path: Path) -> None:
    result, entries = _run(tmp_path, "full", **PROJECT)
    assert result.returncode == 0, result.stderr
    commands = _commands(entries)
    assert [c for c in commands if " create " in f" {c} " or c.startswith("sql users set-password")] == []
    assert not any(c.startswith("secrets versions add") for c in commands)
    assert any(c.startswith("iam roles update tpuChatopsBot ") for c in commands)  # kept exactly right


def test_kubernetes_target(tmp_path: Path) -> None:
    result, entries = _run(tmp_path, "empty", TARGET="kubernetes", K8S_NAMESPACE="bots", **PROJECT)
    assert result.returncode == 0, result.stderr
    commands = _commands(entries)
    assert not any(c.startswith("sql ") for c in commands)
    binding = next(c for c in commands if "roles/iam.workloadIdentityUser" in c)
    assert "serviceAccount:demo-project.svc.id.goog[bots/tpu-chatops]" in binding
    enable = next(e["args"] for e in entries if e["args"][:2] == ["services", "enable"])
    assert "container.googleapis.com" in enable and "run.googleapis.com" not in enable  # type: ignore[operator]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"REGION": "us-east5"}, "set PROJECT to the project id"),
        (
            {"PROJECT": "p", "REGION": "r", "TARGET": "gke"},
            "TARGET must be cloudrun or kubernetes, not 'gke'",
        ),
    ],
)
def test_bad_input_stops_with_one_line(tmp_path: Path, env: dict[str, str], message: str) -> None:
    clean = {k: "" for k in ("PROJECT", "REGION", "TARGET")}
    result, entries = _run(tmp_path, "empty", **{**clean, **env})
    assert result.returncode != 0
    assert message in result.stderr and "Traceback" not in result.stderr
    assert entries == []  # nothing was sent
