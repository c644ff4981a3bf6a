"""Entry point of the local demo: `python -m sim demo [--script FILE] [--scenario FILE] [--speed N]`, and
`python -m sim paths [--write]`: the project files a command passes through (`sim.paths`).

The demo runs the real bot against the SIMULATED Slack, Google Cloud, vLLM and TPU VM in `sim/`; it lives
here, beside the simulators, so that the product (`bot`, `ops`, `llm`) never imports them.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from pathlib import Path

import yaml

import sim.paths
from sim.console import interactive, run_script, stop_running
from sim.demo import Demo


def main(argv: list[str] | None = None) -> int:
    """Parse the demo's arguments and run it.

    Args:
        argv: the arguments after `python -m sim` (default: `sys.argv[1:]`).

    Returns:
        The exit code: 0, 1 if a script line got no final answer (each is named on stderr), 2 for a bad
        script or scenario file.
    """
    parser = argparse.ArgumentParser(prog="python -m sim", description="tpu-chatops on local simulators")
    sub = parser.add_subparsers(dest="action", required=True)
    demo = sub.add_parser("demo", help="run the bot against the local simulators, with a console")
    demo.add_argument("--script", help="run console lines from this file and print the transcript")
    demo.add_argument("--scenario", help="scenario YAML (default: the bundled demo scenario)")
    demo.add_argument(
        "--speed", type=float, help="simulated seconds per real second (e.g. 60 to watch alerts)"
    )
    paths = sub.add_parser("paths", help="trace the project files a command passes through in the demo")
    paths.add_argument("--write", action="store_true", help="rewrite the map in docs/architecture.md")
    args = parser.parse_args(argv)
    if args.action == "paths":
        return _paths(args.write)
    return _demo(args.script, args.scenario, args.speed)


def _paths(write: bool) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("paramiko.transport").setLevel(logging.CRITICAL)
    traced = sim.paths.trace()
    if write:
        sim.paths.write(traced)
    print(sim.paths.section(traced))
    return 0


def _demo(script: str | None, scenario: str | None, speed: float | None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The simulated TPU VM's SSH server logs every client disconnect as an error.
    logging.getLogger("paramiko.transport").setLevel(logging.CRITICAL)
    try:
        lines = Path(script).read_text().splitlines() if script else None
        demo = Demo(scenario, speed=speed, alerts=True)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    code = 0
    try:
        print(demo.banner())
        if lines is not None:
            missing = run_script(demo.user, lines)
            if missing:
                print(f"\n{len(missing)} script line(s) got no final answer:", file=sys.stderr)
                print("\n".join(f"  {each}" for each in missing), file=sys.stderr)
                code = 1
        else:
            interactive(demo.user)
        still = stop_running(demo.user)
        if still:
            print("\nstill running after the cancel:\n" + "\n".join(f"  {s}" for s in still), file=sys.stderr)
    finally:
        _close_within(demo, CLOSE_WAIT_S, code)
    return code


# How long the demo waits for the bot and the simulators to stop before it leaves anyway.
CLOSE_WAIT_S = 30.0


def _close_within(demo: Demo, timeout: float, code: int) -> None:
    """Close the demo; if that takes longer than `timeout` seconds (a command that ignored its cancel keeps
    a worker thread, which the interpreter would wait for at exit), say so and leave the process at once."""
    closing = threading.Thread(target=demo.close, name="demo-close", daemon=True)
    closing.start()
    closing.join(timeout)
    if closing.is_alive():
        print(f"demo: the bot did not stop within {timeout:.0f} s; leaving without waiting", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 1)


if __name__ == "__main__":
    sys.exit(main())
