"""ops.diagnosis.families (catalogue loading, specificity, templates, key lines), llm.agent's reading of a
model message and the serving verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm.agent import as_tool_calls, empty_explanation, inspect_message
from ops.diagnosis.engine import diagnose
from ops.diagnosis.families import (
    Catalogue,
    FixFacts,
    catalogue,
    chips_of,
    fill,
    key_lines,
    load_file,
    use_extra_file,
)
from ops.diagnosis.wordings import wording
from ops.vllm.server import WEDGED, ServingSample, serving_problem
from tests.cases import case_text

TEAM_FILE = """
families:
  - name: nfs-model-cache-stale
    title: stale NFS handle on the model cache
    severity: critical
    specificity: 70
    patterns: ['Stale file handle: ''(?P<path>/mnt/models/[^'']+)''']
    conclusion: the model cache on NFS went stale[ at {path}]
    fix: remount /mnt/models on the VM, then /vllm restart[ ({model})]
    runbook: |
      Page the storage on-call (#storage-oncall) before remounting; the filer may be failing over.
"""


def test_builtin_catalogue_is_valid_and_large() -> None:
    names = [f.name for f in catalogue().families]
    assert len(names) == len(set(names)) >= 25
    assert all(f.sources for f in catalogue().families)


def test_403_beats_401_in_the_same_burst() -> None:
    findings = diagnose(case_text("hf-gated-repo-403-not-authorized.log")).findings
    assert [f.name for f in findings] == ["hf-gated-repo-403"]
    assert "no valid token" not in findings[0].conclusion


def test_fill_drops_optional_parts_without_values() -> None:
    assert fill("lower it[ to {x}][ (now {y})]", {"x": "8"}) == "lower it to 8"
    assert fill("size {a}", {}) == "size ?"


def test_fixes_are_written_for_the_deployment() -> None:
    text = "RuntimeError: RESOURCE_EXHAUSTED: Error loading program: Attempting to reserve 2G"
    generic = diagnose(text).findings[0].fix
    live = diagnose(
        text, FixFacts(accelerator_type="v6e-8", tensor_parallel_size=4, max_model_len=32768)
    ).findings[0]
    assert "to 8 (the v6e-8 has 8 chips)" in live.fix and "try 16384" in live.fix
    assert "to 8" not in generic and "--tensor-parallel-size" in generic


def test_chips() -> None:
    assert (chips_of("v6e-8"), chips_of("v5litepod-16"), chips_of("v4-8"), chips_of("v5p-8")) == (8, 16, 4, 4)
    assert chips_of("tpu") is None


def test_key_lines_root_cause_first_error_and_no_frames() -> None:
    text = "\n".join(
        [
            "INFO 01-01 00:00:00 [core.py:1] starting",
            "ERROR 01-01 00:00:01 [core.py:2] worker 3 failed to load shard",
            "Traceback (most recent call last):",
            '  File "/app/loader.py", line 10, in load',
            "    raise OSError('disk read failed')",
            "OSError: disk read failed",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "Traceback (most recent call last):",
            '  File "/app/engine.py", line 99, in start',
            "    load()",
            "RuntimeError: engine start aborted",
            "ERROR 01-01 00:00:02 [core.py:2] worker 3 failed to load shard",
        ]
    )
    lines = key_lines(text)
    assert lines == [
        "ERROR 01-01 00:00:01 [core.py:2] worker 3 failed to load shard",
        "OSError: disk read failed",
        "RuntimeError: engine start aborted",
    ]
    assert not any(line.startswith("File ") for line in lines)
    assert key_lines("INFO all good\nINFO serving") == []


def test_unknown_failure_shows_key_lines() -> None:
    result = diagnose("ERROR 01-01 00:00:01 [x.py:1] ZeroDivisionError: division by zero in the sampler")
    assert result.unknown and result.key_lines


def test_team_file_adds_a_family_with_runbook(tmp_path: Path) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(TEAM_FILE)
    combined = use_extra_file(path)
    try:
        assert "nfs-model-cache-stale" in combined and "kv-cache-insufficient" in combined
        result = diagnose(
            "OSError: [Errno 116] Stale file handle: '/mnt/models/gemma/model-00001.safetensors'",
            FixFacts(model="google/gemma-4-31B-it"),
        )
        (f,) = result.findings
        assert f.name == "nfs-model-cache-stale" and f.origin == str(path)
        assert "(google/gemma-4-31B-it)" in f.fix
        assert result.runbooks() == [("nfs-model-cache-stale", f.runbook)]
        assert "#storage-oncall" in f.runbook
    finally:
        use_extra_file(None)
    assert "nfs-model-cache-stale" not in catalogue()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("families: nope", "families: Input should be a valid list"),
        ("families:\n  - {name: X, patterns: [a], conclusion: c, fix: f}", "`name` must be"),
        ("families:\n  - {name: x-y, patterns: ['('], conclusion: c, fix: f}", "does not compile"),
        (
            "families:\n  - {name: x-y, patterns: [a], conclusion: c}",
            "bad.yaml:2: families.0..fix: Field required",
        ),
        (
            "families:\n  - {name: x-y, patterns: [a], conclusion: c, fix: f, severity: bad}",
            "severity: Input should be",
        ),
        (
            "families:\n  - {name: x-y, patterns: [a], conclusion: c, fix: f, colour: red}",
            "colour: Extra inputs are not permitted",
        ),
        ("families: [\n", "not valid YAML"),
    ],
)
def test_bad_team_files_are_refused_with_one_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("`", "`")):
        load_file(path)
    with pytest.raises(ValueError, match="cannot read"):
        load_file(tmp_path / "missing.yaml")


def test_overriding_a_builtin_family(tmp_path: Path) -> None:
    families = load_file(Path(__file__).resolve().parents[2] / "ops" / "diagnosis" / "faults.yaml")
    path = tmp_path / "team.yaml"
    path.write_text(
        "families:\n  - {name: disk-full, patterns: ['no space left'], conclusion: full, fix: call Bob}\n"
    )
    combined = Catalogue(families + load_file(path))
    assert combined["disk-full"].fix == "call Bob"
    assert len(combined.families) == len(families)


def test_markup_tool_call_is_parsed_and_stripped() -> None:
    check = inspect_message('Checking.<|tool_call>call:describe{name:<|"|>gemma4-qr<|"|>}<tool_call|>', [])
    assert check.text == "Checking." and not check.empty
    assert [(c.name, c.arguments) for c in check.markup_calls] == [("describe", {"name": "gemma4-qr"})]
    runnable, refused = as_tool_calls(check, {"describe"}, first_id=2)
    assert runnable[0].id == "markup-2" and runnable[0].function.arguments == '{"name": "gemma4-qr"}'
    assert refused == []
    _, refused = as_tool_calls(inspect_message("<|tool_call>call:delete{}<tool_call|>"), {"describe"})
    assert refused == ["delete"]


def test_empty_completion_is_explained() -> None:
    assert inspect_message(None, []).empty and inspect_message("  ", None).empty
    assert not inspect_message("hi").empty
    text = empty_explanation("google/gemma-4-31B-it", "stop", 41)
    assert "empty completion after 41 tokens" in text and "--tool-call-parser gemma4" in text
    assert "max_tokens" in empty_explanation("m", "length")


def test_serving_problem_needs_every_signal() -> None:
    stuck = [ServingSample(0, 0, 3, 100.0), ServingSample(60, 0, 5, 100.0)]
    verdict = serving_problem(stuck, health_ready=True)
    assert verdict == f"{WEDGED}: 5 requests waiting, none running, no new tokens in 60 s"
    assert serving_problem(stuck, health_ready=True, probe_timed_out=False) is None  # it answered
    assert serving_problem(stuck, health_ready=False) is None  # down, not wedged
    moving = [ServingSample(0, 0, 3, 100.0), ServingSample(60, 0, 5, 150.0)]
    assert serving_problem(moving, health_ready=True) is None
    busy = [ServingSample(0, 2, 3, 100.0)]
    assert serving_problem(busy, health_ready=True, probe_timed_out=True) is None
    one = [ServingSample(0, 0, 2, None)]
    assert "probe timed out" in (serving_problem(one, health_ready=True, probe_timed_out=True) or "")
    assert diagnose(verdict or "").findings[0].name == "engine-wedged"


def test_a_long_evidence_line_keeps_its_deciding_words_and_its_prefix() -> None:
    from ops.diagnosis.families import EVIDENCE_CHARS, catalogue, shorten

    prefix = "2026-12-03T06:18:02Z (VllmWorker rank=0 pid=123) "
    decisive = "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: "
    decisive += "Attempting to allocate 1.50G. That was not possible. There are 1.20G free."
    line = prefix + "x" * 700 + " " + decisive + " " + "y" * 700
    [match] = catalogue().match(line)
    assert len(match.evidence) <= EVIDENCE_CHARS
    assert match.evidence.startswith("2026-12-03T06:18:02Z") and "…" in match.evidence
    assert "Attempting to allocate 1.50G. That was not possible." in match.evidence
    assert shorten("short line ") == "short line"
    assert len(shorten("a" * 1000)) == EVIDENCE_CHARS


def test_lines_of_vllms_worker_processes_are_read_through_their_prefix() -> None:
    from ops.diagnosis.families import is_exception_line, key_lines

    worker = "(VllmWorker rank=0 pid=412) ERROR 12-03 06:18:02 [multiproc_executor.py:527] "
    assert is_exception_line(worker + "ValueError: head_dim 80 is not supported by the TPU attention kernel")
    log = "\n".join(
        [
            "(APIServer pid=1) INFO 12-03 06:17:50 [api_server.py:1000] vLLM API server version 0.11.0",
            worker + "Traceback (most recent call last):",
            worker + '  File "/workspace/vllm/v1/executor/multiproc_executor.py", line 501, in worker_main',
            worker + "ValueError: head_dim 80 is not supported by the TPU attention kernel",
            "(EngineCore_DP0 pid=281) ERROR 12-03 06:18:03 [core.py:708] EngineCore failed to start.",
        ]
    )
    assert any("head_dim 80" in line for line in key_lines(log))


# The daemon's refusals of a log driver, as moby words them (container/container.go startLogging,
# daemon/logger/gcplogs/gcplogging.go New and ValidateLogOpts, daemon/logger/factory.go).
LOG_DRIVER_REFUSALS = (
    "docker: Error response from daemon: failed to create task for container: failed to initialize logging "
    "driver: unable to connect or authenticate with Google Cloud Logging: rpc error: code = PermissionDenied "
    "desc = Permission 'logging.logEntries.create' denied on resource (or it may not exist).",
    'docker: Error response from daemon: "cache-disabled" is not a valid option for the gcplogs driver.',
    "docker: Error response from daemon: logger: no log driver named 'gcplogs' is registered.",
)


def test_a_refused_log_driver_is_told_apart_from_a_refused_pull() -> None:
    refused = wording("docker-log-driver-refused")
    assert all(refused.search(text) for text in LOG_DRIVER_REFUSALS)
    pulls = [
        case_text("docker-pull-rate-limit.log"),
        "docker: Error response from daemon: manifest for vllm/vllm-tpu:nope not found: manifest unknown",
        "docker: Error response from daemon: pull access denied for nobody/x, repository does not exist or "
        "may require 'docker login': denied: requested access to the resource is denied",
        'docker: Error response from daemon: Conflict. The container name "/vllm" is already in use',
    ]
    assert not any(refused.search(text) for text in pulls)
