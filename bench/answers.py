"""Grounded answers: the question set of bench/questions.yaml asked of the real bot in the demo world, with
llama.cpp's server (SmolLM2-135M-Instruct, 2048-token context; tests/llama_server.py) as the model endpoint.

Each question is sent as an @mention through the real Slack HTTP stack. It is grounded when every fact the
set lists for it appears in what the user sees (`llm.grounding.missing_facts` over the message text). An
answer contradicts the facts when the bot flags it (`llm.grounding.contradictions`: the model gave a resource
a state the fetched facts deny).

Needs `bash .ci/install-llama-server .venv`. Run: `.venv/bin/python bench/answers.py`.

Last line: RESULT questions=<n> grounded=<g> contradicting_share=<c>
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llm.grounding import missing_facts
from sim.demo import Demo
from tests.llama_server import llama_server, missing

QUESTIONS = Path(__file__).with_name("questions.yaml")
CONTRADICTION_FLAG = "contradicts the facts above"
ANSWER_TOKENS = 64
"""Answers long enough to state a cause (and to contradict a fact), short enough for a CPU-only run."""


def load_questions(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    """The question set: [{"question": str, "facts": [str, ...]}, ...]."""
    data = yaml.safe_load(path.read_text())
    return list(data["questions"])


def main() -> int:
    reason = missing()
    if reason is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    questions = load_questions()
    grounded = contradicting = 0
    with (
        llama_server() as server,
        Demo(vllm_base_url=server.url, vllm_model=server.model, llm_answer_tokens=ANSWER_TOKENS) as demo,
    ):
        for item in questions:
            start = time.monotonic()
            out, answered = demo.user.run(f"@gemma-bot {item['question']}", timeout=180)
            text = "\n".join(out)
            absent = missing_facts(text, item["facts"]) if answered else list(item["facts"])
            grounded += not absent
            contradicting += CONTRADICTION_FLAG in text
            verdict = "grounded" if not absent else f"MISSING {absent}"
            print(f"{time.monotonic() - start:5.1f} s  {item['question']!r}: {verdict}")
            lines = text.splitlines()
            for index, line in enumerate(lines):  # the flag with the model's text, so a reader can judge it
                if CONTRADICTION_FLAG in line:
                    answer = lines[index + 1] if index + 1 < len(lines) else ""
                    print(f"         {line.strip()}\n         model: {answer.strip()[:200]}")
    share = contradicting / len(questions) if questions else 0.0
    print(f"RESULT questions={len(questions)} grounded={grounded} contradicting_share={share:.2f}")
    return 0 if grounded == len(questions) else 1


if __name__ == "__main__":
    sys.exit(main())
