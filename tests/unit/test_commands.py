"""The command parser and registry: every bad input is a UsageError with the usage line."""

import shlex
from datetime import timedelta

import pytest

import bot.handlers  # noqa: F401  (declares every command)
from bot.commands.registry import (
    NotACommand,
    Param,
    Registry,
    UsageError,
    duration,
    normalize,
    resource_name,
    zone_name,
)
from bot.commands.registry import registry as real_registry
from bot.handlers import tpu  # noqa: F401  (declares the real commands)


def _registry() -> Registry:
    reg = Registry()
    reg.command("help", "help", Param("topic", "topic", metavar="TOPIC"))(lambda ctx, topic: topic)
    reg.command(
        "tpu list",
        "list",
        Param("zone", "zone", flag="--zone", kind=zone_name, metavar="Z"),
        Param("all_zones", "all", flag="--all-zones", switch=True),
        exclusive=(("zone", "all_zones"),),
    )(lambda ctx, **kw: kw)
    reg.command(
        "tpu describe",
        "describe",
        Param("name", "name", kind=resource_name, required=True, metavar="NAME"),
        Param("since", "since", flag="--since", kind=duration, metavar="D"),
    )(lambda ctx, **kw: kw)
    reg.command("gemma ask", "ask", Param("prompt", "prompt", required=True, rest=True, metavar="PROMPT"))(
        lambda ctx, **kw: kw
    )
    return reg


def test_parses_options_switches_and_positionals() -> None:
    reg = _registry()
    inv = reg.parse("tpu list --zone us-east5-a")
    assert inv.command.name == "tpu list"
    assert inv.args == {"zone": "us-east5-a", "all_zones": False}
    assert reg.parse("tpu list --all-zones").args == {"zone": None, "all_zones": True}
    assert reg.parse("tpu describe gemma4-qr --since=10m").args == {
        "name": "gemma4-qr",
        "since": timedelta(minutes=10),
    }


def test_rest_positional_keeps_the_whole_prompt() -> None:
    inv = _registry().parse('gemma ask why is "vLLM" slow --today?')
    assert inv.args["prompt"] == "why is vLLM slow --today?"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("tpu list --zone", "`--zone` needs a value"),
        ("tpu list --zone EU", "is not a zone"),
        ("tpu list --zone us-east5-a --all-zones", "cannot be used together"),
        ("tpu list --frobnicate", "unknown option `--frobnicate`"),
        ("tpu list extra", "unexpected `extra`"),
        ("tpu describe", "missing NAME"),
        ("tpu describe 'x; rm -rf /'", "is not a TPU resource name"),
        ("tpu describe $(id)", "is not a TPU resource name"),
        (
            "tpu describe GEMMA4-QR",
            "is not a TPU resource name (lowercase letters, digits, hyphens): did you mean `gemma4-qr`?",
        ),
        ("tpu describe a --since forever", "is not a duration"),
        ("tpu describe a --since 1h --since 2h", "given twice"),
        ("tpu list --all-zones=yes", "takes no value"),
        ("tpu describe 'unbalanced", "could not read that"),
        ("tpu frob", "unknown command `tpu frob`"),
        ("kubectl get pods", "unknown command `kubectl`"),
    ],
)
def test_bad_input_gets_the_usage_line(text: str, problem: str) -> None:
    with pytest.raises(UsageError) as caught:
        _registry().parse(text)
    assert problem in caught.value.problem
    assert caught.value.usage


def test_usage_line_shows_exclusive_groups() -> None:
    command = _registry().parse("tpu list").command
    assert command.usage() == "/tpu list [--zone Z | --all-zones]"


def test_help_forms() -> None:
    reg = _registry()
    assert reg.parse("").args == {"topic": None}
    assert reg.parse("help").args == {"topic": None}
    assert reg.parse("tpu").args == {"topic": "tpu"}
    assert reg.parse("tpu help").args == {"topic": "tpu"}
    assert reg.parse("tpu list --help").args == {"topic": "tpu list"}
    assert reg.parse("help tpu list").args == {"topic": "tpu list"}
    assert reg.parse("help /tpu").args == {"topic": "tpu"}


def test_invocation_text_parses_back_to_the_same_invocation() -> None:
    reg = _registry()
    first = reg.parse("tpu describe gemma4-qr   --since=10m")
    again = reg.parse(first.text)
    assert (again.command, again.args) == (first.command, first.args)
    prompt = reg.parse('gemma ask "it\'s slow; why?"')
    assert reg.parse(prompt.text).args == prompt.args


def test_slack_text_is_normalized() -> None:
    # Slack escapes &, <, > and autocorrect turns quotes and "--" into typographic ones.
    assert normalize("<@U0LAN0Z89> tpu list —zone us-east5-a") == "tpu list --zone us-east5-a"
    assert normalize("gemma ask “a &amp; b”") == 'gemma ask "a & b"'
    assert _registry().parse("<@U0BOT> /tpu list").command.name == "tpu list"


def test_real_registry_groups_and_usage() -> None:
    assert {"tpu", "vllm"} <= set(real_registry.groups())
    for command in real_registry.commands():
        assert command.usage().startswith("/") or command.words == ("help",)
        assert command.summary


def test_every_free_text_flag_is_validated_by_a_pattern() -> None:
    """Only prompts (rest=True) and the help topic take free text; every other value has a validator."""
    from bot.commands.registry import registry

    unvalidated = [
        (c.name, p.name)
        for c in registry.commands()
        for p in c.params
        if not p.switch and not p.rest and p.kind in (None, str)
    ]
    assert unvalidated == [("help", "topic")]


@pytest.mark.parametrize("runtime", ["<!channel>", "v2 alpha", "$(reboot)", "V2-ALPHA", "a" * 64])
def test_runtime_is_refused_unless_it_looks_like_a_runtime_version(runtime: str) -> None:
    from bot.commands.registry import UsageError, registry

    with pytest.raises(UsageError) as caught:
        registry.parse(f"tpu create x --runtime {shlex.quote(runtime)}")
    assert "<!channel>" not in str(caught.value)
    assert (
        registry.parse("tpu create x --runtime tpu-vm-tf-2.16.1-pjrt").args["runtime"]
        == "tpu-vm-tf-2.16.1-pjrt"
    )


@pytest.mark.parametrize(
    ("typed", "suggestion"),
    [
        ("tpu lsit", "did you mean `/tpu list`?"),
        ("tpu describ gemma4-qr", "did you mean `/tpu describe`?"),
        ("vllm metric", "did you mean `/vllm metrics`?"),
        ("tpuu list", "did you mean `/tpu`?"),
    ],
)
def test_an_unknown_verb_gets_the_nearest_ones(typed: str, suggestion: str) -> None:
    with pytest.raises(UsageError) as caught:
        real_registry.parse(typed)
    assert caught.value.problem.endswith(suggestion)


def test_exactly_the_commands_that_ask_the_model_are_marked() -> None:
    asking = {c.name for c in real_registry.commands() if c.asks_model}
    assert asking == {"gemma chat", "gemma ask", "gemma stats", "logs analyze"}


def test_words_that_do_not_read_as_a_command_are_not_a_command() -> None:
    """A mention is a command only when it parses as one or is a typo of one: an unknown group, a verb
    close to none ("vllm has ..."), or words the command does not take make it a question."""
    with pytest.raises(NotACommand) as caught:
        real_registry.parse("tpu xyzzy")
    assert "did you mean" not in caught.value.problem
    for text in (
        "why is the model slow",
        "vllm has been starting for 45 minutes, is it stuck",
        "tpu status of gemma4-old looks odd",
    ):
        with pytest.raises(NotACommand):
            real_registry.parse(text)
    for typo in ("tpu lst", "tpu list --zon us-east5-a", "tpu describe", "vllm logs --tail many"):
        with pytest.raises(UsageError) as caught:
            real_registry.parse(typo)
        assert not isinstance(caught.value, NotACommand), typo


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("TPU LIST", "tpu list"),
        ("/Tpu List --ZONE us-east5-a", "tpu list --zone us-east5-a"),
        ("HELP TPU", "help tpu"),
        ("VLLM Metrics --RAW", "vllm metrics --raw"),
    ],
)
def test_command_words_and_options_are_case_insensitive(typed: str, expected: str) -> None:
    assert real_registry.parse(typed).text == expected


def test_arguments_keep_their_case() -> None:
    invocation = real_registry.parse("GEMMA ASK Is Gemma-4-31B-it on TPU v6e")
    assert invocation.args["prompt"] == "Is Gemma-4-31B-it on TPU v6e"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("tpu cost --hours 0", "more than 0 hours and at most 8760"),
        ("tpu cost --hours 9000", "more than 0 hours and at most 8760"),
        ("tpu cost --hours -1", "more than 0 hours and at most 8760"),
        ("tpu cost --hours soon", "is not a number of hours"),
        ("gemma feedback --last 0", "from 1 to"),
    ],
)
def test_a_value_out_of_range_is_told_the_bounds_it_breaks(text: str, problem: str) -> None:
    with pytest.raises(UsageError) as caught:
        real_registry.parse(text)
    assert problem in caught.value.problem


def test_a_typo_is_shown_the_usage_of_what_it_may_have_meant_not_the_whole_group() -> None:
    with pytest.raises(UsageError) as caught:
        real_registry.parse("tpu lsit")
    assert "did you mean `/tpu list`?" in caught.value.problem
    assert caught.value.usage.splitlines() == [
        f"• `{real_registry.parse('tpu list').command.usage()}`: "
        f"{real_registry.parse('tpu list').command.summary}",
        "`/tpu help` lists every `/tpu` command.",
    ]
