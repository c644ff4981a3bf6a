"""Held-back public failure reports (tests/fixtures/reports/public.yaml) through the bot's diagnosis, each the
way it reaches the bot, scored against what an experienced SRE concludes.

Ways in (`via` of a report):
  container      the vLLM container's `docker logs` (what `/vllm status` and `/vllm logs` read):
                 `ops.diagnosis.engine.diagnose`
  cloud-logging  Cloud Logging entries of the node, one entry per line (what `/logs analyze` reads): the
                 log summarizer's templates (`llm.logsum.summarize`), their exemplars diagnosed as
                 `llm.logsum.analyze` does
  create         a queued resource's create error (what `/tpu describe` and the capacity search read): the
                 resource's state text (`ops.diagnosis.engine.ResourceState`) diagnosed, and
                 `ops.diagnosis.zonefit.classify` of the error typed as `ops.gcp.google` types it (`status`:
                 the
                 create call's HTTP status, or the failed operation's code) for what retrying can do
  command        a command's stderr over SSH (docker): `ops.diagnosis.engine.diagnose`, as
                 `ops.vllm.container` does
  slack, ssh     a Slack Web API refusal, paramiko's error: `ops.diagnosis.engine.diagnose`, as `ops.vllm.ssh`
                 does
With --surfaces the container, Cloud Logging and create reports go through the real bot in the SIMULATED
demo world (`sim.demo.Demo`) instead, asked as on-call would ask:
  container      the container is recreated failing with the report as its log (the host simulator's
                 `run_failing_log`): `/vllm restart`, Confirm, then `/vllm status`
  cloud-logging  the report's lines become Cloud Logging entries of the node two minutes ago:
                 `/logs analyze --since 10m`; the simulated clock then moves an hour on, so the next
                 report's window holds only its own entries
  create         a FAILED queued resource carries the report as its `failedData.error`: `/tpu describe`
  command, slack, ssh  reach no demo surface: their engine answer is used
and each container, Cloud Logging and create report is also asked as on-call asks in chat, with the model
endpoint down (the vLLM simulator stopped, as bench/answers.py's `down` row: the facts alone answer):
`@gemma-bot why did <the resource> fail?` for a create report, `@gemma-bot why did the vLLM server fail?`
otherwise; and a container or create report, whose failure raises an alert, is read from the diagnosis the
alert scheduler posts in the alert's thread (the bot's own scheduler, ticked by hand on the simulated clock):
the FAILED queued resource's state alert, or the vLLM-down alert after its failed checks a simulated minute
apart (the scheduler's outage state is reset per report, so each container report is a new outage).
The answer's first finding is read from the findings view (`bot.views.findings`): ":rotating_light:
*family*: conclusion" and its "_Fix:_" line; a command that fails instead of answering is missed.

Verdicts (the first family named decides, as an on-call reader acts on it):
  right   an expected family (or nothing, when `family` is ['']), its fix has a term of every `fix` group,
          it keeps the `says` figures, says none of `must_not`, and a create error is classified as
          `create_kind`
  half    the right family but an incomplete fix, a lost figure, a must-not said, the wrong create kind;
          or a family listed under `half`
  wrong   another family named first (any family, for a report that must give none)
  missed  nothing recognised where a family was expected

Last lines: by kind, then RESULT right=<n> half=<n> wrong=<n> missed=<n> total=<m> right_ratio=<right/m>.
With --surfaces, those lines once per surface (`surface=command`: the slash command, or the engine for the
ways no command reaches, all reports; `surface=chat`; `surface=alert`), then a DISAGREE line for each report
whose surfaces (and the engine) named different first families. The exit status is 0 only when nothing is
wrong.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httplib2
import yaml
from googleapiclient.errors import HttpError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llm.logsum import summarize  # noqa: E402
from ops.diagnosis.engine import ResourceState, diagnose  # noqa: E402
from ops.diagnosis.families import FixFacts  # noqa: E402
from ops.diagnosis.zonefit import Classification, classify  # noqa: E402
from ops.gcp.cloudlogs import LogEntry  # noqa: E402
from ops.gcp.google import create_error, operation_error  # noqa: E402
from ops.tpu.model import QueuedResourceInfo  # noqa: E402
from ops.vllm.watch import VllmWatch  # noqa: E402
from sim.demo import ALERTS_CHANNEL, Demo  # noqa: E402
from sim.scenario import load as load_scenario  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "reports" / "public.yaml"
VERDICTS = ("right", "half", "wrong", "missed")
DEPLOYMENT = FixFacts(
    model="google/gemma-4-31B-it",
    image="vllm/vllm-tpu:gemma4",
    accelerator_type="v6e-8",
    tensor_parallel_size=8,
    max_model_len=16384,
    flags=("--enable-auto-tool-choice", "--tool-call-parser", "gemma4", "--reasoning-parser", "gemma4"),
)
_LEVEL = re.compile(r"\b(INFO|WARNING|DEBUG)\b")
_ZONE = "us-east5-a"


@dataclass(frozen=True)
class Answer:
    """What the bot said about one report: the first family ("" for none), its conclusion and fix, for a
    create error the classification kind ("" otherwise), and the error line of a command that failed
    instead of answering ("" when it answered)."""

    family: str
    said: str = ""
    fix: str = ""
    create_kind: str = ""
    failed: str = ""


@dataclass(frozen=True)
class Outcome:
    """One report's verdict (see the module docstring) and why it is not right."""

    report: str
    kind: str
    verdict: str
    found: str
    problem: str = ""


def load(path: Path = CORPUS) -> list[dict[str, Any]]:
    """The reports of the corpus file."""
    return list(yaml.safe_load(path.read_text())["reports"])


def severity_of(line: str) -> str:
    """The severity a line gets as a Cloud Logging entry: the level vLLM or Python logging printed in its
    first 60 characters (INFO, WARNING, DEBUG), else ERROR (stderr text, tracebacks)."""
    found = _LEVEL.search(line[:60])
    return found.group(1) if found else "ERROR"


def entries_of(text: str, start: datetime) -> list[LogEntry]:
    """The report's lines as the node's Cloud Logging entries, one a second from `start`."""
    lines = [line for line in text.splitlines() if line.strip()]
    return [
        LogEntry(start + timedelta(seconds=i), severity_of(line), line, node_id="gemma4-qr-node")
        for i, line in enumerate(lines)
    ]


def failed_resource(name: str, text: str) -> QueuedResourceInfo:
    """A FAILED queued resource whose error is the report's text, as `/tpu describe` shows one."""
    return QueuedResourceInfo(
        name=name,
        zone="us-east5-a",
        state="FAILED",
        state_initiator=None,
        provisioning_model="spot",
        accelerator_type=DEPLOYMENT.accelerator_type or "",
        runtime_version="v2-alpha-tpuv6e",
        create_time=None,
        node_ids=(f"{name}-node",),
        nodes=(),
        termination_time=None,
        valid_until=None,
        max_run_duration=None,
        error=text.strip(),
    )


def create_classification(report: dict[str, Any]) -> Classification:
    """What the capacity search concludes from a create error: the error typed as `ops.gcp.google` types it
    (an HTTP error of the create call through `create_error`, a failed operation's `code` through
    `operation_error`), then `ops.diagnosis.zonefit.classify`."""
    text = str(report["text"]).strip()
    scheme, _, number = str(report.get("status", "code 2")).partition(" ")
    code = int(number)
    if scheme == "HTTP":
        body = json.dumps({"error": {"code": code, "message": text}}).encode()
        error = create_error(HttpError(httplib2.Response({"status": code}), body), "TPU API create")
    else:
        error = operation_error({"code": code, "message": text}, "TPU operation create")
    return classify(error)


def engine_answer(report: dict[str, Any]) -> Answer:
    """Diagnose one report the way it reaches the bot (module docstring), without the demo world."""
    text, via = str(report["text"]), report["via"]
    if via in ("command", "slack", "ssh"):
        known = diagnose(text, DEPLOYMENT).top
        return Answer(known.name, known.conclusion, known.fix) if known else Answer("")
    if via == "cloud-logging":
        summary = summarize(entries_of(text, datetime(2026, 1, 1, tzinfo=UTC)))
        exemplars = "\n".join(e for t in summary.templates for e in t.exemplars).replace("\\n", "\n")
        findings = diagnose(exemplars, DEPLOYMENT).findings
    elif via == "create":
        findings = diagnose(ResourceState.of(failed_resource("report-qr", text)), DEPLOYMENT).findings
    else:
        findings = diagnose(text, DEPLOYMENT).findings
    kind = create_classification(report).kind if via == "create" else ""
    if not findings:
        return Answer("", create_kind=kind)
    first = findings[0]
    return Answer(first.name, first.conclusion, first.fix, kind)


def judge(report: dict[str, Any], answer: Answer) -> Outcome:
    """The verdict on one answer (see the module docstring)."""
    expected = [str(f) for f in report["family"]]
    rid, kind, found = report["id"], report["kind"], answer.family
    if answer.failed:
        return Outcome(rid, kind, "missed", "", f"no answer: {answer.failed}")
    if found not in expected:
        if found in report.get("half", []):
            return Outcome(rid, kind, "half", found, f"a neighbouring family; expected {expected}")
        verdict = "missed" if not found else "wrong"
        return Outcome(rid, kind, verdict, found, f"expected {expected}, got {found or 'none'}")
    problems = []
    if answer.create_kind and report.get("create_kind") and answer.create_kind != report["create_kind"]:
        problems.append(f"classified {answer.create_kind}, expected {report['create_kind']}")
    if found:
        told = f"{answer.said} {answer.fix}"
        for group in report.get("fix", []):
            if not any(str(term).lower() in answer.fix.lower() for term in group):
                problems.append(f"fix lacks one of {group}")
        problems += [f"lost figure {f}" for f in report.get("says", []) if str(f) not in told]
        problems += [f"says {t!r}" for t in report.get("must_not", []) if str(t).lower() in told.lower()]
    if problems:
        return Outcome(
            rid, kind, "half", found, "; ".join(problems) + (f" | fix: {answer.fix}" if found else "")
        )
    return Outcome(rid, kind, "right", found)


def report_lines(outcomes: list[Outcome], surface: str = "") -> list[str]:
    """The printed report: each outcome that is not right, the counts by kind, the RESULT line (with
    `surface`, each line names it: `RESULT surface=<surface> right=...`)."""
    tag = f"surface={surface} " if surface else ""
    lines = [
        f"{o.verdict.upper()} {tag}{o.report} [{o.kind}]: {o.problem}"
        for o in outcomes
        if o.verdict != "right"
    ]
    kinds = sorted({o.kind for o in outcomes})
    lines.append(
        f"{tag}by kind: " + "; ".join(_tally(o for o in outcomes if o.kind == k) + f" {k}" for k in kinds)
    )
    counts = Counter(o.verdict for o in outcomes)
    tally = " ".join(f"{v}={counts[v]}" for v in VERDICTS)
    ratio = counts["right"] / len(outcomes) if outcomes else 0.0
    lines.append(f"RESULT {tag}{tally} total={len(outcomes)} right_ratio={ratio:.2f}")
    return lines


def _tally(outcomes: Any) -> str:
    counts = Counter(o.verdict for o in outcomes)
    return "/".join(str(counts[v]) for v in VERDICTS)


# ---- through the demo world (--surfaces) ------------------------------------------------------------------

_FINDING = re.compile(r":rotating_light: \*([a-z0-9-]+)\*: (.*)\n\s*_Fix:_ (.*)")


def answer_of(text: str) -> Answer:
    """The first finding of a bot answer (the findings view's format), or no family; a command that
    failed (its ":x:" line) is an answer with `failed` set."""
    found = _FINDING.search(text)
    if found:
        return Answer(found.group(1), found.group(2), found.group(3))
    failed = next((line for line in text.splitlines() if line.startswith(":x:")), "")
    return Answer("", failed=failed)


def _resource_name(index: int) -> str:
    return f"report-qr-{index}"


def _scenario(reports: list[dict[str, Any]], folder: Path) -> Path:
    """The default scenario with one FAILED queued resource per create report and the report files as the
    host's case folder."""
    scenario = load_scenario(None)
    for index, report in enumerate(reports):
        if report["via"] != "create":
            continue
        scheme, _, number = str(report.get("status", "code 2")).partition(" ")
        code = {"HTTP 400": 3, "HTTP 403": 7, "HTTP 404": 5, "HTTP 429": 8}.get(
            f"{scheme} {number}", int(number)
        )
        name = _resource_name(index)
        scenario["google"]["queued_resources"].append(
            {
                "name": name,
                "zone": _ZONE,
                "state": "FAILED",
                "provisioning_model": "SPOT",
                "created": "5m",  # after the alert watch starts: the scheduler sees each turn FAILED
                "error": {"code": code, "message": str(report["text"]).strip()},
                "node": {
                    "id": f"{name}-node",
                    "accelerator_type": "v6e-8",
                    "runtime_version": "v2-alpha-tpuv6e",
                },
            }
        )
    for qr in scenario["google"]["queued_resources"]:
        if qr["name"] == "gemma4-qr":  # ACTIVE while the bench moves the clock on (hours in all)
            qr["max_run_duration"] = "30d"
    scenario.setdefault("host", {})["cases_dir"] = str(folder)
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def _say(demo: Demo, line: str, timeout: float = 90) -> str:
    out, _ = demo.user.run(line, timeout=timeout)
    return "\n".join(out)


SURFACES = ("engine", "command", "chat", "alert", "stuck")
"""The ways a report is answered with --surfaces: `engine` without the demo world, `command` the slash
command of its way in, `chat` the @mention, `alert` the diagnosis in the alert's thread, `stuck` the
scheduler's notice that vLLM did not come up after `/vllm restart`."""
_ALERTING = ("container", "create")
"""The ways in whose failure raises an alert: a container failing (vLLM down), a FAILED queued resource."""
_STUCK = "start-up looks stuck"
_WINDOW_MIN = 1
"""MAINTENANCE_TIMEOUT_MIN of the bench's world (its lowest allowed value): the maintenance window a
restart opens, which holds the vLLM-down alert, closes with the stuck notice a simulated minute later."""
_HISTORY_S = 2 * 3600
"""Simulated seconds the bench moves the clock on before the first report: past the demo's own logged
failures, none of which is within the chat's default 1 h window after it."""
_DIAGNOSIS = re.compile(r"^:stethoscope: \*State\* (?:`([^`]+)` \()?")


def _question(index: int, report: dict[str, Any]) -> str:
    """What on-call asks in chat about one report: the failed resource, else the vLLM server."""
    if report["via"] == "create":
        return f"@gemma-bot why did {_resource_name(index)} fail?"
    return "@gemma-bot why did the vLLM server fail?"


def _alert_diagnoses(demo: Demo, start: int) -> dict[str, str]:
    """The diagnoses posted in alert threads since message `start`, by subject (a resource's name, or
    "vLLM"): the text of each subject's first one."""
    found: dict[str, str] = {}
    for message in demo.slack.messages[start:]:
        if message.channel != ALERTS_CHANNEL or message.thread_ts is None:
            continue
        subject = _DIAGNOSIS.match(message.text)
        if subject:
            found.setdefault(subject.group(1) or "vLLM", message.text)
    return found


def _fresh_vllm_watch(demo: Demo) -> None:
    """Forget the scheduler's vLLM outage state, as a bot started now would: the endpoint stays down across
    reports (the model endpoint is down for the chat), so each container report is a new outage."""
    assert demo.bot.alerts is not None
    demo.bot.alerts.ledger.set_value("vllm_watch", VllmWatch().to_json())


def _shown(text: str, blocks: Any) -> str:
    """A message as the reader sees it: its text, then every text of its blocks (Block Kit `text` fields)."""
    parts = [text]
    if isinstance(blocks, dict):
        parts += [
            _shown(v, "") if k == "text" and isinstance(v, str) else _shown("", v) for k, v in blocks.items()
        ]
    elif isinstance(blocks, list):
        parts += [_shown("", b) for b in blocks]
    return "\n".join(p for p in parts if p)


def _alert_answers(demo: Demo) -> tuple[Answer, Answer]:
    """After a failed `/vllm restart`: tick the alert scheduler a simulated minute apart until the restart's
    maintenance window has closed with its "start-up looks stuck" notice and the vLLM-down alert is due
    (its consecutive failed checks), and read (the vLLM-down alert's diagnosis, the stuck notice's first
    finding)."""
    assert demo.bot.alerts is not None and demo.bot.alerts.serving is not None
    _fresh_vllm_watch(demo)
    start = len(demo.slack.messages)
    for _ in range(demo.bot.alerts.serving.health_failures + 1):
        demo.gcp.advance(_WINDOW_MIN * 60 + 1)
        demo.bot.alerts.tick_all()
    demo.user.arrived()  # shown: the alert channel's posts are not the answer to the next command
    text = _alert_diagnoses(demo, start).get("vLLM")
    alert = answer_of(text) if text else Answer("", failed="no vLLM-down alert diagnosis was posted")
    notice = next((_shown(m.text, m.blocks) for m in demo.slack.messages[start:] if _STUCK in m.text), "")
    stuck = answer_of(notice) if notice else Answer("", failed="no start-up-stuck notice was posted")
    return alert, stuck


def surface_answers(reports: list[dict[str, Any]]) -> dict[str, dict[str, Answer]]:
    """Each report's answers by surface (`SURFACES`; a surface its way in does not reach is absent), asked
    in one SIMULATED demo world whose model endpoint is down (the vLLM simulator stopped: the chat answers
    from the facts alone) and whose alert scheduler is ticked by hand (module docstring)."""
    answers: dict[str, dict[str, Answer]] = {r["id"]: {"engine": engine_answer(r)} for r in reports}
    with tempfile.TemporaryDirectory(prefix="reports-") as tmp:
        folder = Path(tmp)
        for index, report in enumerate(reports):
            (folder / f"report-{index}.log").write_text(str(report["text"]))
        # vllm_replace_settle_s=0: /vllm restart keeps the new (failing) container instead of restoring the
        # previous one, so /vllm status reads the report as the container's log.
        with Demo(
            _scenario(reports, folder),
            http_timeout_s=2,
            vllm_replace_settle_s=0,
            maintenance_timeout_min=_WINDOW_MIN,
        ) as demo:
            demo.vllm.stop()  # the model endpoint is down: what the chat says comes from the facts alone
            assert demo.bot.alerts is not None, "the demo sets ALERT_CHANNEL"
            start = len(demo.slack.messages)
            # The watch starts now and the report resources are created after it: the first tick sees each
            # turn NEW -> FAILED and posts its state alert, diagnosed in the alert's thread.
            demo.bot.alerts.tick_all()
            resource_alerts = _alert_diagnoses(demo, start)
            demo.user.arrived()  # shown: the alerts are not the answer to the first command
            # The demo world logs its own failures in the hours before its start (sim/gcp/loggen.py): move
            # past them, so a report's windows (10 min for /logs analyze, the chat's 1 h) hold only its own.
            demo.gcp.advance(_HISTORY_S)
            for index, report in enumerate(reports):
                via, got = report["via"], answers[report["id"]]
                if via not in ("container", "cloud-logging", "create"):
                    continue
                if via == "container":
                    demo.host.set_run_failing_log(f"report-{index}.log")
                    _say(demo, "/vllm restart")
                    _say(demo, "click Confirm")
                    got["command"] = answer_of(_say(demo, "/vllm status"))
                    got["chat"] = answer_of(_say(demo, _question(index, report), timeout=240))
                    got["alert"], got["stuck"] = _alert_answers(demo)
                elif via == "cloud-logging":
                    at = demo.gcp.now() - timedelta(minutes=2)
                    lines = [line for line in str(report["text"]).splitlines() if line.strip()]
                    for offset, line in enumerate(lines):
                        demo.gcp.add_log_entry(
                            line, severity=severity_of(line), at=at + timedelta(seconds=offset)
                        )
                    got["command"] = answer_of(_say(demo, "/logs analyze --since 10m"))
                    got["chat"] = answer_of(_say(demo, _question(index, report), timeout=240))
                    demo.gcp.advance(3600)
                else:
                    kind = create_classification(report).kind
                    found = answer_of(_say(demo, f"/tpu describe {_resource_name(index)} --zone {_ZONE}"))
                    got["command"] = replace(found, create_kind=kind)
                    chat = answer_of(_say(demo, _question(index, report), timeout=240))
                    got["chat"] = replace(chat, create_kind=kind)
                    text = resource_alerts.get(_resource_name(index))
                    alert = (
                        answer_of(text) if text else Answer("", failed="no state alert diagnosis was posted")
                    )
                    got["alert"] = replace(alert, create_kind=kind)
    return answers


def disagreements(reports: list[dict[str, Any]], answers: dict[str, dict[str, Answer]]) -> list[str]:
    """One line per report whose surfaces named different first families (a surface that failed to answer
    counts as naming nothing): `DISAGREE <id> [<via>]: engine=<f> command=<f> chat=<f> alert=<f>`."""
    lines = []
    for report in reports:
        got = answers[report["id"]]
        named = {surface: got[surface].family or "none" for surface in SURFACES if surface in got}
        if len(set(named.values())) > 1:
            said = " ".join(f"{surface}={family}" for surface, family in named.items())
            lines.append(f"DISAGREE {report['id']} [{report['via']}]: {said}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--surfaces", action="store_true", help="ask the bot in the SIMULATED demo world")
    parser.add_argument("--only", help="a regex: the reports whose id matches")
    args = parser.parse_args(argv)
    reports = [r for r in load() if not args.only or re.search(args.only, r["id"])]
    if not args.surfaces:
        outcomes = [judge(r, engine_answer(r)) for r in reports]
        print("\n".join(report_lines(outcomes)))
        return 0 if not any(o.verdict == "wrong" for o in outcomes) else 1
    answers = surface_answers(reports)
    wrong = False
    for surface in SURFACES[1:]:
        # the command row keeps the engine's answer for the ways in no demo surface reaches (all reports)
        fallback = "engine" if surface == "command" else surface
        outcomes = [
            judge(r, answers[r["id"]].get(surface) or answers[r["id"]][fallback])
            for r in reports
            if surface in answers[r["id"]] or fallback in answers[r["id"]]
        ]
        print("\n".join(report_lines(outcomes, surface)))
        wrong = wrong or any(o.verdict == "wrong" for o in outcomes)
    print("\n".join(disagreements(reports, answers)))
    return 0 if not wrong else 1


if __name__ == "__main__":
    sys.exit(main())
