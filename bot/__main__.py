"""Entry point: `python -m bot [serve | demo [--script FILE] [--scenario FILE] | manifest]`."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from bot.config import ConfigError, load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot", description="tpu-chatops Slack bot")
    sub = parser.add_subparsers(dest="action")
    sub.add_parser("serve", help="run the bot (BOT_MODE=http or socket); the default")
    demo = sub.add_parser("demo", help="run the bot against the local simulators, with a console")
    demo.add_argument("--script", help="run console lines from this file and print the transcript")
    demo.add_argument("--scenario", help="scenario YAML (default: the bundled demo scenario)")
    demo.add_argument(
        "--speed", type=float, help="simulated seconds per real second (e.g. 60 to watch alerts)"
    )
    manifest = sub.add_parser("manifest", help="print app_manifest.yaml generated from the command registry")
    manifest.add_argument("--url", help="request URL for HTTP mode (default: a Socket Mode manifest)")
    args = parser.parse_args(argv)

    if args.action == "manifest":
        from bot.manifest import manifest_yaml

        sys.stdout.write(manifest_yaml(args.url))
        return 0
    if args.action == "demo":
        return _demo(args.script, args.scenario, args.speed)
    from bot.observability import setup_logging

    setup_logging(logging.INFO)  # JSON for Cloud Logging on Cloud Run or LOG_FORMAT=json, else lines
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    from slack_bolt.error import BoltError

    from bot.app import serve

    try:
        serve(settings)
    except BoltError as exc:
        print(f"Slack error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0


def _demo(script: str | None, scenario: str | None, speed: float | None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The console already says when the bot does not handle a command; Bolt's developer hint is noise here.
    logging.getLogger("slack_bolt").setLevel(logging.ERROR)
    # The simulated TPU VM's SSH server logs every client disconnect as an error.
    logging.getLogger("paramiko.transport").setLevel(logging.CRITICAL)
    import yaml

    from sim.console import interactive, run_script
    from sim.demo import Demo

    try:
        lines = Path(script).read_text().splitlines() if script else None
        demo = Demo(scenario, speed=speed, alerts=True)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    with demo:
        print(demo.banner())
        if lines is not None:
            missing = run_script(demo.user, lines)
            if missing:
                print(f"\n{missing} command(s) got no final answer", file=sys.stderr)
            return 1 if missing else 0
        interactive(demo.user)
    return 0


if __name__ == "__main__":
    sys.exit(main())
