"""Diagnosis score: every handed case file and every variant of tests/fixtures/diagnose_cases.yaml through
the same code the bot runs, each checked against its expected family and fix terms.

A case enters the way the bot meets it (`via`):
  log         `ops.diagnosis.engine.diagnose` (docker logs, journalctl, Cloud Logging text, command errors)
  create      `ops.diagnosis.zonefit.classify` plus the catalogue (a queued resource's create error);
              `reason` is also checked when given
  health      the `/metrics` scrapes of the text (split at "# ---- " lines, 60 s apart) with /health 200
              and a probe that timed out, through `ops.vllm.server.serving_problem`, then diagnosed
  completion  a chat completion body through `llm.agent.inspect_message`, then diagnosed
A case is right when the most severe finding is the expected family (or, for `family: ""`, when there is
no finding), every fix term appears in its fix and no `absent` term in its conclusion or fix. Otherwise it
is one of:
  wrong   a different family is named first, or any finding for a case that expects none (a negative
          case: a healthy log, a benign warning, noise)
  missed  no finding where a family was expected
  flawed  the right family, but its fix lacks a term or it says what it must not
Each case runs against the deployment of the table (`deployment:`), or its own.

Last line: RESULT right=<n> wrong=<n> missed=<n> flawed=<n> total=<m> families=<k>
(families: distinct expected families). The exit status is 0 only when every case is right.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llm.agent import inspect_message  # noqa: E402
from ops.diagnosis.engine import diagnose  # noqa: E402
from ops.diagnosis.families import FixFacts  # noqa: E402
from ops.diagnosis.zonefit import classify  # noqa: E402
from ops.vllm.metrics import summarize  # noqa: E402
from ops.vllm.server import ServingSample, serving_problem  # noqa: E402
from tests.cases import case_names, case_text  # noqa: E402

TABLE = ROOT / "tests" / "fixtures" / "diagnose_cases.yaml"
VERDICTS = ("right", "wrong", "missed", "flawed")


@dataclass(frozen=True)
class Outcome:
    """One case's result: its label, its verdict ("right", "wrong", "missed" or "flawed", see the module
    docstring), the family found ("" for none), and why it is not right."""

    label: str
    verdict: str
    found: str
    problem: str = ""

    @property
    def right(self) -> bool:
        """Whether the case is right."""
        return self.verdict == "right"


def load_table(path: Path = TABLE) -> tuple[FixFacts, list[dict[str, Any]]]:
    """The table's default deployment and its cases."""
    data = yaml.safe_load(path.read_text())
    return FixFacts(**_deployment(data.get("deployment") or {})), list(data["cases"])


def _deployment(raw: dict[str, Any]) -> dict[str, Any]:
    out = dict(raw)
    if "flags" in out:
        out["flags"] = tuple(out["flags"])
    return out


def text_of(case: dict[str, Any]) -> str:
    """The case's input: its handed file, or its own text."""
    return case_text(case["file"]) if "file" in case else str(case["text"])


def _health_text(text: str) -> str:
    scrapes = [part for part in text.split("# ---- ") if "vllm:" in part]
    samples = []
    for index, scrape in enumerate(scrapes):
        summary = summarize(scrape.split("\n", 1)[1] if "\n" in scrape else scrape)
        samples.append(
            ServingSample(60.0 * index, summary.running, summary.waiting, summary.generation_tokens)
        )
    return serving_problem(samples, health_ready=True, probe_timed_out=True) or ""


def _completion_text(text: str) -> str:
    body = json.loads(text)
    message = body["choices"][0]["message"]
    check = inspect_message(message.get("content"), message.get("tool_calls"))
    if check.markup_calls:
        names = ", ".join(call.name for call in check.markup_calls)
        return f"tool call left as markup: <|tool_call>call:{names}"
    return "the model returned an empty completion" if check.empty else check.text


def run_case(case: dict[str, Any], default: FixFacts) -> Outcome:
    """Diagnose one case the way the bot meets it and check the expectation."""
    label = case.get("file") or case.get("label") or str(case.get("text", ""))[:60]
    deployment = FixFacts(**_deployment(case["deployment"])) if "deployment" in case else default
    text = text_of(case)
    via = case.get("via", "log")
    if via == "health":
        text = _health_text(text)
    elif via == "completion":
        text = _completion_text(text)
    findings = diagnose(text, deployment).findings
    found = findings[0].name if findings else ""
    expected = str(case["family"])
    if found != expected:
        verdict = "missed" if not found else "wrong"
        return Outcome(label, verdict, found, f"expected {expected or 'no finding'}, got {found or 'none'}")
    if via == "create":
        kind = classify(text)
        if "reason" in case and kind.reason != case["reason"]:
            return Outcome(label, "flawed", found, f"classified {kind.reason!r}, expected {case['reason']!r}")
    fix = findings[0].fix if findings else ""
    said = (findings[0].conclusion + " " + fix) if findings else ""
    wrong = [term for term in case.get("absent", []) if term in said]
    if wrong:
        return Outcome(label, "flawed", found, f"says {wrong}: {said}")
    missing = [str(term) for term in case.get("fix", []) if str(term) not in fix]
    if missing:
        return Outcome(label, "flawed", found, f"fix lacks {missing}: {fix}")
    return Outcome(label, "right", found)


def main() -> int:
    default, cases = load_table()
    handed = case_names()
    listed = {c["file"] for c in cases if "file" in c}
    if handed - listed:
        print(f"case files without an expectation: {sorted(handed - listed)}")
        return 1
    outcomes = [run_case(case, default) for case in cases]
    for outcome in outcomes:
        if not outcome.right:
            print(f"{outcome.verdict.upper()} {outcome.label}: {outcome.problem}")
    families = {str(c["family"]) for c in cases if c["family"]}
    counts = {verdict: sum(o.verdict == verdict for o in outcomes) for verdict in VERDICTS}
    tally = " ".join(f"{verdict}={counts[verdict]}" for verdict in VERDICTS)
    print(f"RESULT {tally} total={len(outcomes)} families={len(families)}")
    return 0 if counts["right"] == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
