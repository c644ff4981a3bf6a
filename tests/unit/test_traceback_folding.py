"""Traceback lines logged one entry each are folded into their exception line's template: a frame
(`File "...", line N, in f`) is never an error kind above the cause, whatever order the entries come in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from llm.logsum import ORPHAN_TEMPLATE, TemplateSummary, summarize
from ops.diagnosis.families import catalogue, is_exception_line, is_traceback_line
from ops.gcp.cloudlogs import LogEntry

CASES = Path(__file__).resolve().parent.parent / "fixtures" / "cases"
T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)

PLAIN = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 708, in run_engine_core',
    "    engine_core = EngineCoreProc(*args, **kwargs)",
    "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    '  File "/usr/local/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 502, in __init__',
    "    super().__init__(vllm_config, executor_class, log_stats)",
    "RuntimeError: Engine core initialization failed. See root cause above.",
]
PREFIXED = [
    f"ERROR 12-01 02:00:00 [core.py:396] {line}"
    if i
    else "ERROR 12-01 02:00:00 [core.py:396] EngineCore failed"
    for i, line in enumerate(
        [
            "",
            "Traceback (most recent call last):",
            '  File "/opt/vllm/vllm/v1/worker/tpu_worker.py", line 219, in compile_or_warm_up_model',
            "    self.model_runner.capture_model()",
            '  File "/opt/vllm/vllm/v1/worker/tpu_model_runner.py", line 1125, in capture_model',
            "    self._dummy_run(num_tokens)",
            "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV "
            "cache is needed, which is larger than the available KV cache memory (0.71 GiB).",
        ]
    )
]
CHAINED = [
    "Traceback (most recent call last):",
    '  File "/srv/app.py", line 3, in load',
    "OSError: [Errno 28] No space left on device",
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "Traceback (most recent call last):",
    '  File "/srv/app.py", line 9, in main',
    "    load()",
    "RuntimeError: model load failed",
]


def _entries(lines: list[str], *, repeats: int = 5, node: str = "gemma4-qr-node") -> list[LogEntry]:
    """`repeats` tracebacks a minute apart, each line its own ERROR entry milliseconds apart (as docker and
    the Cloud Logging agent ship them)."""
    out = []
    for r in range(repeats):
        start = T0 + timedelta(minutes=r)
        for i, line in enumerate(x for x in lines if x.strip()):
            out.append(LogEntry(start + timedelta(milliseconds=i), "ERROR", line, node_id=node))
    return out


def _frame_kinds(templates: tuple[TemplateSummary, ...]) -> list[str]:
    return [t.template for t in templates if "File" in t.template or "Traceback" in t.template]


@pytest.mark.parametrize("lines", [PLAIN, PREFIXED, CHAINED], ids=["plain", "vllm-prefix", "chained"])
@pytest.mark.parametrize("newest_first", [True, False])
def test_frames_are_folded_into_their_exception(lines: list[str], newest_first: bool) -> None:
    entries = _entries(lines)
    entries.sort(key=lambda e: e.timestamp, reverse=newest_first)
    summary = summarize(entries)
    assert not _frame_kinds(summary.templates), [t.template for t in summary.templates]
    assert summary.templates[0].template != ORPHAN_TEMPLATE
    exceptions = [t for t in summary.templates if t.traceback_lines]
    assert exceptions and all(is_exception_line(t.exemplars[0]) for t in exceptions)
    folded = sum(t.traceback_lines for t in summary.templates)
    assert folded == sum(1 for x in lines if x.strip() and is_traceback_line(x)) * 5
    assert summary.error_entries == len(entries)  # folded lines are still counted as entries


def test_each_traceback_goes_to_its_own_exception_in_a_chain() -> None:
    summary = summarize(_entries(CHAINED, repeats=1))
    by_text = {t.exemplars[0]: t.traceback_lines for t in summary.templates}
    assert by_text["OSError: [Errno 28] No space left on device"] == 2  # Traceback + one frame
    assert by_text["RuntimeError: model load failed"] == 4  # marker, Traceback, frame, source line


def test_frames_with_no_exception_near_them_rank_last() -> None:
    frames = [LogEntry(T0, "ERROR", '  File "/srv/a.py", line 1, in f', node_id="n")] * 3
    cause = LogEntry(T0 + timedelta(minutes=5), "WARNING", "something else happened", node_id="n")
    summary = summarize([*frames, cause])
    assert summary.templates[-1].template == ORPHAN_TEMPLATE and summary.templates[-1].count == 3
    assert summary.templates[0].template != ORPHAN_TEMPLATE


def test_a_frame_on_another_node_is_not_folded_into_this_nodes_exception() -> None:
    entries = [
        LogEntry(T0, "ERROR", '  File "/srv/a.py", line 1, in f', node_id="other-node"),
        LogEntry(T0 + timedelta(milliseconds=1), "ERROR", "RuntimeError: boom", node_id="gemma4-qr-node"),
    ]
    summary = summarize(entries)
    assert sum(t.traceback_lines for t in summary.templates) == 0
    assert summary.templates[-1].template == ORPHAN_TEMPLATE


@pytest.mark.parametrize(
    "line",
    [
        "        * write /var/lib/docker/tmp/GetImageBlob1: no space left on device",
        "RuntimeError: Engine core initialization failed",
        "ERROR 12-01 02:00:00 [core.py:396] EngineCore failed to start.",
        "  - item in a list",
    ],
)
def test_messages_are_not_traceback_lines(line: str) -> None:
    assert not is_traceback_line(line)


def test_the_handed_cases_lose_no_family_to_folding() -> None:
    """No line of a real case file that names a known failure is taken for a traceback line."""
    for path in sorted(CASES.glob("*.log")):
        for line in path.read_text().splitlines():
            if is_traceback_line(line):
                assert catalogue().best(line) is None, (path.name, line)
