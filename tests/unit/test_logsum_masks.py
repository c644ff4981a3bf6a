"""Drain's masking groups what varies between real occurrences of one message: the pid and rank in vLLM's
process prefix, a collector's time stamp before the line, conda and venv paths."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from llm.logsum import TemplateStream
from ops.gcp.cloudlogs import LogEntry

T0 = datetime(2026, 12, 6, tzinfo=UTC)
TOO_LARGE = (
    "ERROR 12-06 07:34:47 [serving_chat.py:257] ValueError: 'max_tokens' or 'max_completion_tokens' is too "
    "large: 8192. This model's maximum context length is 8192 tokens and your request has {n} input tokens "
    "(8192 > 8192 - {n})."
)
# Each group: lines of one message as real logs vary them, then the template they make.
GROUPS = {
    "<APIServer> ERROR": [
        "2026-04-28T14:17:50.089230833+08:00 (APIServer pid=1) " + TOO_LARGE.format(n=1210),
        "(APIServer pid=26325) " + TOO_LARGE.format(n=977),
        "2026-12-06T07:34:47Z (APIServer pid=8812) " + TOO_LARGE.format(n=31),
    ],
    "<EngineCore> ERROR": [
        "(EngineCore_DP0 pid=281) ERROR 12-03 09:00:05 [core.py:708] EngineCore failed to start.",
        "(EngineCore_DP1 pid=97) ERROR 12-03 09:00:05 [core.py:708] EngineCore failed to start.",
        "(EngineCore pid=7) ERROR 12-03 09:00:05 [core.py:708] EngineCore failed to start.",
    ],
    "<Worker> ERROR": [
        f"{prefix} ERROR 04-15 07:27:42 [multiproc_executor.py:871] RuntimeError: Unable to initialize"
        for prefix in ("(Worker pid=6625)", "(Worker_TP3 pid=9)", "(VllmWorker rank=0 pid=412)")
    ],
    "No such file or directory: '<PATH>'": [
        f"FileNotFoundError: [Errno 2] No such file or directory: '{path}/config.json'"
        for path in (
            "/root/storage/miniconda3/envs/kkms_test/lib/python3.10/site-packages/vllm",
            "/usr/local/lib/python3.12/dist-packages/vllm",
            "/opt/venv/lib/python3.12/site-packages/vllm",
        )
    ],
}


def test_varying_pids_ranks_stamps_and_paths_make_one_template_each() -> None:
    stream = TemplateStream()
    lines = [line for group in GROUPS.values() for line in group]
    for i, line in enumerate(lines):
        stream.add(LogEntry(T0 + timedelta(seconds=i), "ERROR", line))
    templates = stream.summary().templates
    assert len(templates) == len(GROUPS), [t.template for t in templates]
    for part, group in GROUPS.items():
        (template,) = [t for t in templates if part in t.template]
        assert template.count == len(group)
        assert template.exemplars[0] == group[0]  # the real line, prefix and all
