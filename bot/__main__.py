"""Entry point: `python -m bot [serve | manifest [--url URL] | ssh-key]` (the demo: `python -m sim demo`)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from types import FrameType

from bot.config import ConfigError, load_settings
from ops.ssh import ssh_keys_entry


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot", description="tpu-chatops Slack bot")
    sub = parser.add_subparsers(dest="action")
    sub.add_parser("serve", help="run the bot (BOT_MODE=http or socket); the default")
    manifest = sub.add_parser("manifest", help="print app_manifest.yaml generated from the command registry")
    manifest.add_argument("--url", help="request URL for HTTP mode (default: a Socket Mode manifest)")
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
        from bot.manifest import manifest_yaml, request_url

        try:
            url = None if args.url is None else request_url(args.url)
        except ValueError as exc:
            print(f"manifest: {exc}", file=sys.stderr)
            return 2
        sys.stdout.write(manifest_yaml(url))
        return 0
    if args.action == "ssh-key":  # no logging set up: it prints one line
        return _ssh_key()
    from bot.observability import setup_logging

    setup_logging(logging.INFO)  # JSON for Cloud Logging on Cloud Run or LOG_FORMAT=json, else lines
    try:
        settings = load_settings()
    except ConfigError as exc:
        return _config_errors(exc)
    from bot.app import serve
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
