"""Fair under load: questions for the model run on a pool of their own, so reads never wait behind them, and
one user may have only MODEL_QUESTIONS_PER_USER of them at once. Through the real bot over signed HTTP; the
vLLM simulator holds every chat completion until the test releases it (a model busy for as long as needed)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from sim.console import DEMO_USER, SlackUser
from sim.demo import Demo

OTHER_USER = "U0OTHER001"
LIMIT_NOTE = "you have 2 questions for the model being answered already"


@pytest.fixture()
def busy() -> Iterator[Demo]:
    """A demo with two command threads and three model threads, at most two questions a user; the model
    answers nothing until `hold_chats(False)` (always called at the end)."""
    with Demo(worker_threads=2, model_threads=3, model_questions_per_user=2) as world:
        world.vllm.hold_chats(True)
        try:
            yield world
        finally:
            world.vllm.hold_chats(False)


class _Question:
    """`@gemma-bot QUESTION` sent as one user from a thread of its own; `answer()` is what the bot said in
    the question's thread, once the console saw its final answer."""

    def __init__(self, world: Demo, user_id: str, question: str) -> None:
        self._world = world
        self._user = SlackUser(world.server.url, world.signing_secret, world.slack, user_id=user_id)
        self._thread = threading.Thread(
            target=self._user.run, args=(f"@gemma-bot {question}",), kwargs={"timeout": 90}
        )
        self._thread.start()

    def answer(self, timeout: float = 120) -> str:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "no answer"
        ts = self._user.last_mention_ts
        return "\n".join(m.render() for m in self._world.slack.messages if m.thread_ts == ts and ts)

    def answered(self) -> bool:
        return not self._thread.is_alive()


def _held(world: Demo, count: int) -> None:
    """Wait (generously) until `count` chat completions have reached the model and are held there."""
    deadline = time.monotonic() + 60
    while len(world.vllm.chat_requests) < count:
        assert time.monotonic() < deadline, f"{len(world.vllm.chat_requests)} of {count} questions reached it"
        time.sleep(0.05)


def test_a_read_answers_while_every_command_thread_could_be_busy_with_the_model(busy: Demo) -> None:
    asked = [_Question(busy, DEMO_USER, "is gemma4-qr healthy?") for _ in range(2)]
    asked.append(_Question(busy, OTHER_USER, "what does it cost?"))
    _held(busy, 3)  # more questions waiting for the model than there are command threads
    out, answered = busy.user.run("/tpu status", timeout=30)
    assert answered and "gemma4-qr" in "\n".join(out), out
    assert not any(q.answered() for q in asked)  # the model still holds every question
    busy.vllm.hold_chats(False)
    for question in asked:
        assert "written by" in question.answer()


def test_a_third_question_of_one_user_is_told_to_wait_while_another_users_runs(busy: Demo) -> None:
    mine = [_Question(busy, DEMO_USER, "is gemma4-qr healthy?") for _ in range(2)]
    _held(busy, 2)
    third = _Question(busy, DEMO_USER, "and what does it cost?").answer(timeout=60)
    assert LIMIT_NOTE in third and "wait for one to finish" in third and "written by" not in third
    theirs = _Question(busy, OTHER_USER, "what does it cost?")
    _held(busy, 3)  # the other user's question reached the model
    refusals = [e for e in busy.bot.services.store.audit(last=50) if e.action == "refuse"]
    assert any(e.user_id == DEMO_USER and LIMIT_NOTE in e.outcome for e in refusals)
    busy.vllm.hold_chats(False)
    for question in [*mine, theirs]:
        answer = question.answer()
        assert "written by" in answer and LIMIT_NOTE not in answer, answer
    # every question ended, so its count was given back: the same user may ask again
    again = _Question(busy, DEMO_USER, "is gemma4-qr healthy now?").answer()
    assert "written by" in again and LIMIT_NOTE not in again, again
