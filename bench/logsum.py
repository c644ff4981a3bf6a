"""Log summarizer benchmark: 100,000 Cloud Logging entries -> Drain templates -> a prompt within a budget.

Entries come from the simulator's generator (`sim.gcp.generate_logs`): the REAL failure texts of
tests/fixtures/cases (each case repeated over a 6 h window, one entry per line, timestamps/pids/request ids
varied) among INFO/WARNING noise typical of vLLM on a TPU VM. No model is called. The budget is that of a
16384-token model answering in 1024 tokens (16384 - 1024, as `llm.logsum.prompt_budget` would derive it
before its own template overhead).

Figures:
  entries_per_s   entries grouped per second by `llm.logsum.summarize` (Drain, masking, exemplar redaction)
  peak_mb         peak resident memory of this process (ru_maxrss; the 100,000 entries included), MiB
  prompt_tokens   estimated tokens of the prompt `build_prompt` made; budget_tokens its budget
  coverage        share of the error templates (severity >= ERROR) holding at least 0.1% of the entries that
                  reach the prompt
  naive_coverage  the same share when the prompt is instead the newest entries, one line each, truncated to
                  the same budget

Last line: RESULT entries=100000 entries_per_s=<x> peak_mb=<m> prompt_tokens=<t> budget_tokens=<b>
           coverage=<c> naive_coverage=<n>
"""

from __future__ import annotations

import resource
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llm.logsum import build_prompt, estimate_tokens, summarize
from ops.cloudlogs import entry_from_api
from sim.gcp import CASES_DIR, case_lines, generate_logs

TOTAL = 100_000
BUDGET = 16384 - 1024
START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
# (case file, occurrences, window): incidents at different times over the last 6 h (client errors recur all
# along), with shares from about 3.6% of the entries down to below the 0.1% threshold.
CASES = [
    ("vllm-request-too-long.log", 600, {"window": "6h"}),
    ("vllm-kv-cache-insufficient.log", 300, {"from": "-5h", "to": "-4h"}),
    ("vllm-hbm-oom-program-load.log", 60, {"from": "-4h", "to": "-3h"}),
    ("vllm-tpu-device-busy.log", 200, {"from": "-3h", "to": "-150m"}),
    ("vllm-hbm-oom-allocate-buffer.log", 150, {"from": "-2h", "to": "-90m"}),
    ("vllm-hf-gated-repo-401.log", 40, {"from": "-6h", "to": "-330m"}),
    ("docker-pull-rate-limit.log", 120, {"from": "-330m", "to": "-5h"}),
    ("tpu-create-zone-stockout.txt", 50, {"window": "6h"}),
    ("tpu-create-accelerator-not-in-zone.txt", 30, {"window": "6h"}),
]


def main() -> None:
    error_lines = sum(len(case_lines(CASES_DIR, name)) * count for name, count, _ in CASES)
    spec = {
        "seed": 42,
        "noise": {"count": TOTAL - error_lines, "window": "6h"},
        "cases": [{"file": name, "count": count, **when} for name, count, when in CASES],
    }
    started = time.perf_counter()
    entries = [entry_from_api(body) for body in generate_logs(spec, project="bench", start=START)]
    build_s = time.perf_counter() - started
    assert len(entries) == TOTAL, len(entries)
    print(f"built {len(entries)} entries ({error_lines} from {len(CASES)} real cases) in {build_s:.2f} s")

    summary = summarize(entries)
    rate = TOTAL / summary.grouping_s
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"grouped into {len(summary.templates)} templates in {summary.grouping_s:.2f} s ({rate:.0f}/s)")

    started = time.perf_counter()
    prompt = build_prompt(summary, BUDGET)
    print(
        f"prompt: {prompt.prompt_tokens} estimated tokens of {BUDGET}, {len(prompt.included)} templates in, "
        f"{prompt.omitted_templates} omitted, built in {time.perf_counter() - started:.3f} s"
    )

    threshold = TOTAL * 0.001
    important = [t for t in summary.templates if t.is_error and t.count >= threshold]
    included = set(prompt.included)
    coverage = sum(t.template_id in included for t in important) / len(important)

    # Naive: the newest entries, one line each, until the same budget is used up.
    newest = sorted(entries, key=lambda e: e.timestamp, reverse=True)
    used, seen = 0, set()
    for entry in newest:
        line = f"{entry.timestamp:%Y-%m-%dT%H:%M:%SZ} {entry.severity} {entry.message}\n"
        used += estimate_tokens(line)
        if used > BUDGET:
            break
        template = summary.template_of(entry.message)
        if template is not None:
            seen.add(template.template_id)
    naive = sum(t.template_id in seen for t in important) / len(important)
    print(f"error templates with >= 0.1% of the entries: {len(important)}")
    for t in important:
        mark = "in" if t.template_id in included else "--"
        print(f"  [{mark}] {t.severity:<8} {t.count:>6}  {t.template[:90]}")
    print(
        f"RESULT entries={TOTAL} entries_per_s={rate:.0f} peak_mb={peak_mb:.0f} "
        f"prompt_tokens={prompt.prompt_tokens} budget_tokens={BUDGET} coverage={coverage:.3f} "
        f"naive_coverage={naive:.3f}"
    )


if __name__ == "__main__":
    main()
