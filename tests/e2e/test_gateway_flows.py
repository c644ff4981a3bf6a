"""Issue flows through the real bot and the Slack simulator: the startup script reaches the user byte for
byte, long log listings keep every line, hostile flags never turn live."""

from __future__ import annotations

import re

from bot.shared.tpu_requests import startup_config
from ops.vllm import deploy
from sim.demo import Demo
from sim.slack import Message, unescape


def _new(demo: Demo, start: int) -> list[Message]:
    return demo.slack.messages[start:]


def test_tpu_config_startup_is_byte_for_byte_the_script_the_vm_runs(demo: Demo) -> None:
    s = demo.settings
    expected = deploy.startup_script(startup_config(s))
    assert f"--name {s.vllm_container} " in expected  # the container /vllm status|logs|restart act on
    start = len(demo.slack.messages)
    _, answered = demo.user.run("/tpu config startup")
    assert answered
    (script,) = [m for m in _new(demo, start) if m.kind == "file" and m.filename == "startup.sh"]
    assert script.content.decode() == expected
    assert "REDACTED" not in "".join(unescape(m.text) for m in _new(demo, start))


def test_logs_with_a_high_limit_keep_every_line(demo: Demo) -> None:
    start = len(demo.slack.messages)
    _, answered = demo.user.run("/logs --limit 200 --since 7d")
    assert answered
    messages = _new(demo, start)
    shown = "\n".join(
        unescape(b["text"]["text"]) for m in messages for b in m.blocks if b.get("type") == "section"
    )
    files = "\n".join(m.content.decode() for m in messages if m.kind == "file")
    count = re.search(r"\*(\d+) entries\*", shown)
    assert count is not None, shown
    entry = re.compile(r"^\d\d-\d\d \d\d:\d\d:\d\d ")
    held = {line for line in (shown + "\n" + files).splitlines() if entry.match(line.strip("`"))}
    assert len(held) >= int(count.group(1)) > 18


def test_a_hostile_runtime_flag_is_refused_and_never_live(demo: Demo) -> None:
    out, _ = demo.user.run("/tpu create x --runtime <!channel>")
    assert "<!channel>" not in out[0].replace("&lt;!channel&gt;", "")
    assert "not a TPU runtime version" in unescape(out[0])


def test_audit_rows_never_hold_the_tokens_a_prompt_quoted(demo: Demo) -> None:
    token = "ghp_" + "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"
    demo.user.run(f"/gemma ask why does my GITHUB_TOKEN={token} fail")
    rows = demo.bot.services.store.audit(last=10)
    assert any("gemma ask" in row.command for row in rows)
    assert all(token not in row.command and token not in row.outcome for row in rows)


def test_an_expired_response_url_still_answers_in_the_channel(demo: Demo) -> None:
    start = len(demo.slack.messages)
    demo.slack.fail_next("response", error="expired_url", status=404)  # the one answer this command sends
    _, answered = demo.user.run("/vllm endpoint")
    assert answered
    posts = [m for m in _new(demo, start) if m.kind == "post" and m.channel == demo.user.channel_id]
    assert posts and not posts[-1].in_progress
