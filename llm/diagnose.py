"""Failure signatures of vLLM on Cloud TPU, recognised in log text by rules (no model needed).

`diagnose(text)` applies `RULES` (regex -> Finding) to every line of any log (docker logs, journalctl,
command stderr) and returns what an SRE would conclude, most severe first. The signatures come from the real
cases in tests/fixtures/cases/ (see its README for each expected conclusion) and docs/vllm.md §2.4
(EngineCore start-up failure) and §4.3 (KV cache, SMEM OOM, derived max_model_len, /dev/vfio busy, HF token
401/403).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["RULES", "SEVERITIES", "Finding", "Rule", "diagnose"]

SEVERITIES = ("critical", "error", "warning", "info")
"""Most severe first. critical: the server cannot start or died; error: a failure whose real cause is
elsewhere in the log (a symptom); warning: a client error while the server is healthy; info: a hint."""

_EVIDENCE_MAX = 400


@dataclass(frozen=True)
class Finding:
    """One diagnosed problem.

    Attributes:
        name: stable rule name, e.g. "kv-cache-insufficient".
        conclusion: what is wrong, one sentence with the figures extracted from the log.
        fix: what to do.
        severity: one of SEVERITIES.
        evidence: the first log line that matched (stripped, at most 400 characters).
        count: how many lines matched this rule with the same conclusion.
        values: figures extracted from the log, e.g. {"estimated_max_model_len": "5632"}.
        related: for "engine-core-failed", the last EngineCore lines before the failure (the root cause).
    """

    name: str
    conclusion: str
    fix: str
    severity: str
    evidence: str
    count: int = 1
    values: dict[str, str] = field(default_factory=dict)
    related: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rule:
    """One signature.

    Attributes:
        name: the Finding name.
        pattern: searched in each line.
        severity: one of SEVERITIES.
        conclusion, fix: functions of the match's named groups (missing groups are absent from the dict).
    """

    name: str
    pattern: re.Pattern[str]
    severity: str
    conclusion: Callable[[dict[str, str]], str]
    fix: Callable[[dict[str, str]], str]


_HBM_FIX = (
    "lower --gpu-memory-utilization (e.g. 0.9 -> 0.8), --max-model-len or --max-num-seqs, or raise "
    "--tensor-parallel-size / use a TPU with more chips"
)
_HF_FIX = (
    "store a Hugging Face token in Secret Manager (the secret the bot's docker run reads) for an account "
    "that accepted the model license on huggingface.co, then /vllm restart"
)


def _const(text: str) -> Callable[[dict[str, str]], str]:
    return lambda _groups: text


def _rule(
    name: str,
    pattern: str,
    severity: str,
    conclusion: Callable[[dict[str, str]], str] | str,
    fix: Callable[[dict[str, str]], str] | str,
) -> Rule:
    return Rule(
        name,
        re.compile(pattern),
        severity,
        conclusion if callable(conclusion) else _const(conclusion),
        fix if callable(fix) else _const(fix),
    )


def _program_load(g: dict[str, str]) -> str:
    text = "TPU HBM out of memory at startup: an XLA program could not reserve HBM"
    if "need" in g:
        text += f" ({g['need']} needed, {g.get('free', '?')} free)"
    return text


def _allocate(g: dict[str, str]) -> str:
    size = f" of {g['size']}" if "size" in g else ""
    return f"TPU HBM out of memory: allocating a device buffer{size} failed"


def _kv(g: dict[str, str]) -> str:
    text = f"KV cache too small for max_model_len {g['max_len']}"
    if "needed" in g:
        text += f": one max-length request needs {g['needed']} of KV cache, {g['available']} is available"
    if "estimate" in g:
        text += f"; vLLM estimates the maximum model length that fits at {g['estimate']} tokens"
    return text


def _kv_fix(g: dict[str, str]) -> str:
    if "estimate" in g:
        return (
            f"set --max-model-len at or below {g['estimate']} (the estimate vLLM printed), or raise "
            "--gpu-memory-utilization or --tensor-parallel-size to make room for a longer context"
        )
    return "lower --max-model-len, or raise --gpu-memory-utilization or --tensor-parallel-size"


def _too_long(g: dict[str, str]) -> str:
    parts = []
    if "prompt" in g:
        parts.append(f"{g['prompt']} prompt tokens")
    if "requested" in g:
        parts.append(f"{g['requested']} tokens requested")
    if "max_tokens" in g:
        parts.append(f"max_tokens {g['max_tokens']}")
    detail = f" ({', '.join(parts)})" if parts else ""
    return (
        "client error, server healthy: a request's prompt + max_tokens exceed max_model_len "
        f"({g['limit']} tokens){detail}"
    )


RULES: tuple[Rule, ...] = (
    _rule(
        "tpu-hbm-oom-program-load",
        r"RESOURCE_EXHAUSTED: Error loading program(?:: Attempting to reserve (?P<need>[\d.]+\s?[KMGT]i?B?) "
        r"at the bottom of memory\..*?There are (?P<free>[\d.]+\s?[KMGT]i?B?) free)?"
        r"|Ran out of memory in memory space hbm",
        "critical",
        _program_load,
        _HBM_FIX,
    ),
    _rule(
        "tpu-hbm-oom-allocate-buffer",
        r"(?:RESOURCE_EXHAUSTED: Error allocating device buffer|AllocateBuffer returning error)"
        r"(?:.*?Attempting to allocate (?P<size>[\d.]+\s?[KMGT]i?B?)\b)?",
        "critical",
        _allocate,
        _HBM_FIX + "; if free HBM looked sufficient, suspect fragmentation and recreate the container",
    ),
    _rule(
        "kv-cache-insufficient",
        r"To serve at least one request with the models?'?s?'?s? max seq len \((?P<max_len>\d+)\),? "
        r"\(?(?P<needed>[\d.]+ ?[KMGT]i?B) KV cache is needed, which is larger than the available KV cache "
        r"memory \((?P<available>[\d.]+ ?[KMGT]i?B)\)"
        r"(?:.*?estimated maximum model length is (?P<estimate>\d+))?",
        "critical",
        _kv,
        _kv_fix,
    ),
    _rule(
        "kv-cache-insufficient",
        r"max seq len \((?P<max_len>\d+)\) is larger than the maximum number of tokens that can be stored in "
        r"KV cache \((?P<estimate>\d+)\)",
        "critical",
        _kv,
        _kv_fix,
    ),
    _rule(
        "max-model-len-above-derived",
        r"User-specified max_model_len \((?P<max_len>\d+)\) is greater than the derived max_model_len "
        r"\((?P<derived>[^)]*)\)",
        "critical",
        lambda g: f"--max-model-len {g['max_len']} is above the model's own limit ({g['derived']})",
        "lower --max-model-len to the derived limit (Gemma 4 31B: 262144; the recipes use 16384)",
    ),
    _rule(
        "xla-smem-oom",
        r"Ran out of memory in memory space smem",
        "critical",
        "XLA compilation ran out of TPU scalar memory (SMEM) at startup",
        "lower --max-model-len, --max-num-seqs or --max-num-batched-tokens (vllm#8318)",
    ),
    _rule(
        "tpu-device-busy",
        r"open\((?P<device>/dev/vfio/\d+)\): Device or resource busy"
        r"|Couldn't open iommu group (?P<group>/dev/vfio/\d+)",
        "critical",
        "another container or process holds the TPU (/dev/vfio busy), so vLLM cannot initialise it",
        "stop or remove the other container (`docker ps -a`; /vllm restart does `docker rm -f` first), or "
        "recreate the VM if a stale process survived a preemption",
    ),
    _rule(
        "hf-gated-repo-401",
        r"GatedRepoError: 401|Cannot access gated repo"
        r"|Access to model (?P<model>\S+) is restricted\. You must have access to it and be authenticated",
        "critical",
        "Hugging Face refused the model download: gated repo and no valid token (HTTP 401)",
        _HF_FIX,
    ),
    _rule(
        "hf-gated-repo-403",
        r"GatedRepoError: 403|is not in the authorized list|403 Client Error.*huggingface\.co",
        "critical",
        "Hugging Face refused the model download: the token's account may not use this gated model "
        "(HTTP 403)",
        "accept the model license on huggingface.co with the token's account (or use a token of an account "
        "that has), update the secret, then /vllm restart",
    ),
    _rule(
        "docker-pull-rate-limit",
        r"toomanyrequests: You have reached your pull rate limit",
        "critical",
        "the image pull was refused: Docker Hub pull rate limit reached",
        "authenticate docker on the VM (docker login), retry with backoff, or mirror the image in "
        "Artifact Registry",
    ),
    _rule(
        "secret-manager-denied",
        r"PERMISSION_DENIED: Permission '?secretmanager\.versions\.access'? denied",
        "critical",
        "the VM cannot read the Hugging Face token from Secret Manager",
        "grant the VM's service account roles/secretmanager.secretAccessor on the secret and give the VM "
        "the cloud-platform scope",
    ),
    _rule(
        "docker-socket-denied",
        r"permission denied while trying to connect to the Docker daemon socket",
        "critical",
        "the SSH user may not use docker on the VM",
        "add the user to the docker group, or configure the bot's SSH host with sudo",
    ),
    _rule(
        "engine-dead",
        r"EngineDeadError|EngineCore encountered an issue",
        "critical",
        "the vLLM engine died while serving (EngineDeadError): /health answers 503",
        "restart the container (/vllm restart); the cause is in the earlier EngineCore lines of the log",
    ),
    _rule(
        "engine-core-failed",
        r"EngineCore failed to start|Engine core initialization failed",
        "error",
        "the vLLM engine core failed to start; the root cause is in the earlier (EngineCore ...) lines",
        "read the EngineCore lines before this one (the related lines below), or /vllm logs with a larger "
        "tail; the last few lines only show the APIServer giving up",
    ),
    _rule(
        "request-too-long",
        r"maximum context length is (?P<limit>\d+) tokens\. However, you requested (?P<requested>\d+) tokens"
        r"(?: \((?P<prompt>\d+) in the messages, (?P<completion>\d+) in the completion\))?",
        "warning",
        _too_long,
        "shorten the prompt or lower max_tokens (the server answered HTTP 400 and keeps serving)",
    ),
    _rule(
        "request-too-long",
        r"'max_tokens' or 'max_completion_tokens' is too large: (?P<max_tokens>\d+)\. This model's maximum "
        r"context length is (?P<limit>\d+) tokens and your request has (?P<prompt>\d+) input tokens",
        "warning",
        _too_long,
        "shorten the prompt or lower max_tokens (the server answered HTTP 400 and keeps serving)",
    ),
    _rule(
        "request-too-long",
        r"maximum context length is (?P<limit>\d+) tokens\. However, your request has (?P<prompt>\d+) input "
        r"tokens",
        "warning",
        _too_long,
        "shorten the prompt (the server answered HTTP 400 and keeps serving)",
    ),
)
"""The signature table, in priority order within a severity."""

_VALUE_NAMES = {
    "estimate": "estimated_max_model_len",
    "max_len": "max_model_len",
    "limit": "max_model_len",
}
_ENGINE_CORE = re.compile(r"\(EngineCore[^)]*\)")
_EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b:")


@dataclass
class _Hit:
    rule: Rule
    priority: int
    index: int
    evidence: str
    fix: str
    values: dict[str, str]
    count: int = 1
    last: int = 0


def diagnose(text: str) -> list[Finding]:
    """Recognise known failure signatures in log text.

    Args:
        text: any log text (docker logs, journalctl, a command's stderr); lines are matched one by one.

    Returns:
        Findings, de-duplicated (same rule and conclusion -> one finding with `count`), most severe first
        (SEVERITIES order), then by rule order, then by first occurrence. Empty when nothing is recognised,
        e.g. for a healthy start-up log.
    """
    lines = text.splitlines()
    hits: dict[tuple[str, str], _Hit] = {}
    for index, line in enumerate(lines):
        for priority, rule in enumerate(RULES):
            match = rule.pattern.search(line)
            if match is None:
                continue
            groups = {k: v for k, v in match.groupdict().items() if v is not None}
            values = {_VALUE_NAMES.get(k, k): v for k, v in groups.items()}
            key = (rule.name, rule.conclusion(groups))
            hit = hits.get(key)
            if hit is None:
                hits[key] = _Hit(rule, priority, index, _evidence(line), rule.fix(groups), values, last=index)
            else:
                hit.count += 1
                hit.last = index
                for k, v in values.items():
                    hit.values.setdefault(k, v)
            break  # one rule per line: the table is ordered most specific first
    ordered = sorted(
        hits.items(), key=lambda kv: (SEVERITIES.index(kv[1].rule.severity), kv[1].priority, kv[1].index)
    )
    return [
        Finding(
            name=name,
            conclusion=conclusion,
            fix=hit.fix,
            severity=hit.rule.severity,
            evidence=hit.evidence,
            count=hit.count,
            values=hit.values,
            related=_engine_core_context(lines, hit.last, hit.rule) if name == "engine-core-failed" else (),
        )
        for (name, conclusion), hit in ordered
    ]


def _evidence(line: str) -> str:
    line = line.strip()
    return line if len(line) <= _EVIDENCE_MAX else line[: _EVIDENCE_MAX - 1] + "…"


def _engine_core_context(lines: list[str], index: int, rule: Rule, keep: int = 3) -> tuple[str, ...]:
    """The root-cause candidates for an EngineCore start-up failure: the last `keep` `(EngineCore...)` lines
    before line `index` (the last failure line), preferring exception lines (`...Error:`), then ERROR lines.
    """
    earlier = [line for line in lines[:index] if _ENGINE_CORE.search(line) and not rule.pattern.search(line)]
    exceptions = [line for line in earlier if _EXCEPTION.search(line)]
    errors = [line for line in earlier if "ERROR" in line]
    chosen = (exceptions or errors or earlier)[-keep:]
    return tuple(_evidence(line) for line in chosen)
