"""ops.diagnosis.engine on the real cases (sim/cases, tests/fixtures/cases; conclusions from their READMEs)
and
negatives."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ops.diagnosis.engine import SEVERITIES, diagnose
from sim.host.container import healthy_startup_lines
from tests.cases import case_names, case_text


def test_every_vllm_and_docker_case_is_recognised() -> None:
    names = sorted(
        n for n in case_names() if n.endswith(".log") and n.startswith(("vllm-", "docker-", "hf-"))
    )
    assert len(names) == 10
    for name in names:
        assert diagnose(case_text(name)).findings, name


def test_hbm_oom_at_program_load() -> None:
    (f,) = diagnose(case_text("vllm-hbm-oom-program-load.log")).findings
    assert f.name == "tpu-hbm-oom-program-load" and f.severity == "critical"
    assert "HBM out of memory at startup" in f.conclusion
    assert (f.values["need"], f.values["free"]) == ("1.04G", "905.37M")
    for flag in ("--gpu-memory-utilization", "--max-model-len", "--max-num-seqs", "--tensor-parallel-size"):
        assert flag in f.fix
    assert f.evidence.startswith(
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: Error loading program"
    )


def test_hbm_oom_allocating_a_buffer() -> None:
    (f,) = diagnose(case_text("vllm-hbm-oom-allocate-buffer.log")).findings
    assert f.name == "tpu-hbm-oom-allocate-buffer"
    assert "HBM out of memory" in f.conclusion and "1.96G" in f.conclusion
    assert "fragmentation" in f.fix and "--gpu-memory-utilization" in f.fix


def test_kv_cache_too_small_extracts_the_estimate() -> None:
    (f,) = diagnose(case_text("vllm-kv-cache-insufficient.log")).findings
    assert f.name == "kv-cache-insufficient"
    assert f.values["estimated_max_model_len"] == "5632"
    assert f.values["max_model_len"] == "131072"
    assert (f.values["needed"], f.values["available"]) == ("16.00 GiB", "0.71 GiB")
    assert "5632" in f.conclusion and "--max-model-len at or below 5632" in f.fix


def test_request_too_long_both_wordings_client_error_server_healthy() -> None:
    findings = diagnose(case_text("vllm-request-too-long.log")).findings
    assert [f.name for f in findings] == ["request-too-long", "request-too-long"]
    assert [f.values["max_model_len"] for f in findings] == ["16384", "8192"]
    for f in findings:
        assert f.severity == "warning"
        assert "client error, server healthy" in f.conclusion
        assert "max_tokens" in f.fix
    assert findings[0].values["requested"] == "122946"
    assert (findings[1].values["prompt"], findings[1].values["max_tokens"]) == ("1210", "8192")


def test_hf_gated_repo_401() -> None:
    (f,) = diagnose(case_text("vllm-hf-gated-repo-401.log")).findings
    assert f.name == "hf-gated-repo-401" and f.count == 3  # three lines, one finding
    assert "401" in f.conclusion and "Hugging Face" in f.conclusion
    assert "Secret Manager" in f.fix and "license" in f.fix
    assert f.values["model"] == "google/embeddinggemma-300m"
    assert "for google/embeddinggemma-300m" in f.fix  # the repository the error names, not the served model


def test_docker_pull_rate_limit() -> None:
    (f,) = diagnose(case_text("docker-pull-rate-limit.log")).findings
    assert f.name == "docker-pull-rate-limit"
    assert "rate limit" in f.conclusion
    assert "authenticate" in f.fix and "retry" in f.fix and "mirror" in f.fix


def test_tpu_device_busy() -> None:
    (f,) = diagnose(case_text("vllm-tpu-device-busy.log")).findings
    assert f.name == "tpu-device-busy" and f.count == 2
    assert "holds the TPU" in f.conclusion
    assert "docker rm -f" in f.fix and "recreate the VM" in f.fix
    assert f.values["device"] == "/dev/vfio/0"


def test_engine_core_failed_points_at_earlier_engine_core_lines() -> None:
    text = "\n".join(
        [
            "(EngineCore_DP0 pid=281) INFO 04-15 07:20:01 [core.py:76] Initializing a V1 LLM engine",
            "(EngineCore_DP0 pid=281) ERROR 04-15 07:21:09 [core.py:708] EngineCore failed to start.",
            "(EngineCore_DP0 pid=281) ERROR 04-15 07:21:09 [core.py:708] ValueError: something odd",
            "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {'EngineCore_DP0': 1}",
        ]
    )
    (f,) = diagnose(text).findings
    assert f.name == "engine-core-failed" and f.severity == "error" and f.count == 2
    assert "earlier" in f.conclusion and "EngineCore" in f.conclusion
    # the root cause: the EngineCore exception line before the APIServer's give-up line
    assert f.related == (text.splitlines()[2],)
    no_cause = text.splitlines()[0] + "\n" + text.splitlines()[3]
    (h,) = diagnose(no_cause).findings
    assert h.related == (text.splitlines()[0],)


def test_specific_cause_ranks_before_the_engine_core_symptom() -> None:
    text = (
        case_text("vllm-kv-cache-insufficient.log")
        + "\n(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above.\n"
        + case_text("vllm-request-too-long.log")
    )
    names = [f.name for f in diagnose(text).findings]
    assert names == ["kv-cache-insufficient", "engine-core-failed", "request-too-long", "request-too-long"]
    severities = [SEVERITIES.index(f.severity) for f in diagnose(text).findings]
    assert severities == sorted(severities)


def test_xla_smem_oom_and_derived_max_model_len() -> None:
    smem = "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space smem."
    (f,) = diagnose(smem).findings
    assert f.name == "xla-smem-oom" and "SMEM" in f.conclusion and "--max-model-len" in f.fix
    derived = (
        "ValueError: User-specified max_model_len (524288) is greater than the derived max_model_len "
        "(max_position_embeddings=262144 or model_max_length=None in model's config.json)."
    )
    (g,) = diagnose(derived).findings
    assert g.name == "max-model-len-above-derived" and g.values["max_model_len"] == "524288"


def test_engine_dead_and_secret_denied() -> None:
    names = {
        f.name
        for f in diagnose(
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace.\n"
            "ERROR: (gcloud.secrets.versions.access) PERMISSION_DENIED: Permission "
            "'secretmanager.versions.access' denied for resource 'projects/p/secrets/hf-token'"
        ).findings
    }
    assert names == {"engine-dead", "secret-manager-denied"}


@pytest.mark.parametrize("boot_s", [0.0, 600.0])
def test_healthy_startup_log_gives_nothing(boot_s: float) -> None:
    lines = healthy_startup_lines(datetime(2026, 4, 15, 7, 20, tzinfo=UTC), boot_s=boot_s)
    text = "\n".join(line for _, line in lines)
    assert text.endswith("Application startup complete.")
    assert diagnose(text).findings == ()


def test_normal_traffic_lines_give_nothing() -> None:
    text = "\n".join(
        [
            "(APIServer pid=1) INFO 04-15 07:41:01 [loggers.py:127] Engine 000: Avg prompt throughput: "
            "1638.4 tokens/s, Avg generation throughput: 320.0 tokens/s, Running: 8 reqs, Waiting: 0 reqs, "
            "GPU KV cache usage: 1.8%, Prefix cache hit rate: 0.0%",
            '(APIServer pid=1) INFO:     127.0.0.1:50512 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
            '(APIServer pid=1) INFO:     127.0.0.1:50514 - "GET /health HTTP/1.1" 200 OK',
            "",
        ]
    )
    assert diagnose(text).findings == ()
    assert diagnose("").findings == ()


def test_long_lines_are_cut_in_evidence() -> None:
    long_line = "x" * 5000 + " toomanyrequests: You have reached your pull rate limit"
    (f,) = diagnose(long_line).findings
    assert len(f.evidence) <= 400


def test_one_entry_reads_every_signal_and_keeps_the_evidence_source_and_time() -> None:
    from datetime import UTC, datetime

    from ops.diagnosis.engine import CreateError, LogLines, RemoteError, ResourceState

    at = datetime(2026, 12, 3, 9, 27, 6, tzinfo=UTC)
    log = LogLines("container", ((at, "INFO 12-03 09:27:05 [api_server.py:1] starting"),))
    refused = RemoteError(
        "slack", "The server responded with: {'ok': False, 'error': 'channel_not_found'}", at
    )
    quota = CreateError(
        "Quota 'TPUV6EPodPerProjectPerZoneForTPUAPI' exceeded. Limit: 0.0 in zone asia-east1-c."
    )
    gone = ResourceState("gemma4-qr", "ACTIVE", node_ids=("gemma4-qr-node",))
    result = diagnose([log, refused, quota, gone])
    by_name = {f.name: f for f in result.findings}
    assert by_name["tpu-quota-zero"].source == "tpu-api"
    slack = next(f for f in result.findings if f.source == "slack")
    assert slack.at == at and slack.confidence in ("high", "medium")
    assert any("gone" in f.evidence for f in result.findings if f.source == "tpu-api")
    assert diagnose(log).findings == ()
