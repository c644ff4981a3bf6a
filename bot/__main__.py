"""Entry point: `python -m bot [serve | manifest [--url URL] | ssh-key]` (the demo: `python -m sim demo`)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from types import FrameType

from bot.config import ConfigError, load_settings, load_slack_app_settings
from ops.tpu.model import ssh_keys_entry


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (what a container runtime sends to stop the bot, then SIGKILL after its grace period: 10 s
    on Cloud Run and 30 s by default on Kubernetes) ends the bot like Ctrl-C: `serve` closes the HTTP server,
    pools, worker processes and the store. Python's default for SIGTERM exits without any of that, leaving
    the spawned worker processes behind."""
    raise KeyboardInterrupt(f"signal {signum}")


def _config_errors(exc: ConfigError) -> int:
    for problem in exc.problems:
        print(f"config error: {problem}", file=sys.stderr)
    return 2


def _ssh_key() -> int:
    """`ssh-key`: print the bot's `ssh-keys` metadata line (docs/ssh.md); 2 when it cannot be made."""
    try:
        settings = load_settings()
    except ConfigError as exc:
        return _config_errors(exc)
    if not settings.ssh_key_path:
        print("ssh-key: SSH_KEY_PATH is unset (docs/ssh.md)", file=sys.stderr)
        return 2
    print(ssh_keys_entry(settings.ssh_key_path, settings.ssh_user))
    return 0


def _manifest(url: str | None) -> int:
    """Print the app manifest for BOT_MODE; 2 and one line per problem on stderr when the mode and URL
    do not make one (HTTP mode without a URL, a URL in Socket Mode, a URL Slack cannot post to)."""
    overrides = {} if url is None else {"slack_request_url": url}
    try:
        app = load_slack_app_settings(**overrides)
    except ConfigError as exc:
        for problem in exc.problems:
            shown = problem if url is None else problem.replace("SLACK_REQUEST_URL", "--url")
            print(f"manifest: {shown}", file=sys.stderr)
        return 2
    if app.bot_mode == "http" and app.slack_request_url is None:
        print(
            "manifest: BOT_MODE=http (the default) needs the public URL Slack posts to: pass --url "
            "https://HOST/slack/events or set SLACK_REQUEST_URL; for Socket Mode set BOT_MODE=socket",
            file=sys.stderr,
        )
        return 2
    from bot.slack.manifest import manifest_yaml

    sys.stdout.write(manifest_yaml(app.slack_request_url if app.bot_mode == "http" else None))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot", description="tpu-chatops Slack bot")
    sub = parser.add_subparsers(dest="action")
    sub.add_parser("serve", help="run the bot (BOT_MODE=http or socket); the default")
    manifest = sub.add_parser(
        "manifest", help="print the Slack app manifest for BOT_MODE (http: with --url or SLACK_REQUEST_URL)"
    )
    manifest.add_argument(
        "--url", help="HTTP mode's public request URL, https://HOST/slack/events (default: SLACK_REQUEST_URL)"
    )
    sub.add_parser("ssh-key", help="print the bot's ssh-keys metadata line (SSH_USER and the public key)")
    # The demo runs on the simulators, which are no part of the bot: it lives in sim/ (a source checkout).
    sub.add_parser("demo", help="moved: `make demo`, or `python -m sim demo` in a source checkout")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["demo"]:
        print(
            "the demo moved beside the simulators: run `make demo`, or `python -m sim demo ...`",
            file=sys.stderr,
        )
        return 2
    args = parser.parse_args(argv)

    if args.action == "manifest":
        return _manifest(args.url)
    if args.action == "ssh-key":  # no logging set up: it prints one line
        return _ssh_key()
    from bot.observability import setup_logging

    setup_logging(logging.INFO)  # JSON for Cloud Logging on Cloud Run or LOG_FORMAT=json, else lines
    try:
        settings = load_settings()
    except ConfigError as exc:
        return _config_errors(exc)
    from bot.slack.app import serve
    from bot.startup import explain, google_credentials_problem

    no_credentials = google_credentials_problem(settings)
    if no_credentials is not None:
        print(f"start-up error: {no_credentials}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        serve(settings)
    except KeyboardInterrupt:
        return 0
    except Exception as exc:  # every start-up failure becomes one line naming the setting and the fix
        print(f"start-up error: {explain(exc, settings)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
