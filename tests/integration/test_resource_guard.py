"""The resource guard (tests/resources.py) fails a run that leaks, serially and under pytest-xdist.

Each case runs a real pytest in a subprocess, with CI=true and the guard registered as tests/conftest.py
does, on one test file that leaks one kind of resource: descriptors, threads, a child process, or a
grandchild orphaned by its shell (adopted by the subreaper). A run that leaks nothing passes, also when it
started multiprocessing's resource tracker (a child that lives as long as the process).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.resources import FD_BUDGET, THREAD_BUDGET

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """
from tests.resources import ResourceWatch

def pytest_addoption(parser):
    parser.addoption("--resources", action="store_true")

def pytest_configure(config):
    config.pluginmanager.register(ResourceWatch(config), "resource-watch")
"""

LEAKS = {
    "fds": f"""
import os
KEPT = []
def test_leak():
    KEPT.extend(os.open(os.devnull, os.O_RDONLY) for _ in range({FD_BUDGET + 10}))
""",
    "threads": f"""
import threading
STOP = threading.Event()
def test_leak():
    for n in range({THREAD_BUDGET + 4}):
        threading.Thread(target=STOP.wait, name=f"leaky-{{n}}", daemon=True).start()
""",
    "child": """
import os, subprocess
def test_leak():
    child = subprocess.Popen(["sleep", "60"])
    with open(os.environ["PIDS"], "a") as pids:
        pids.write(f"{child.pid}\\n")
""",
    "orphan": """
import os, subprocess
def test_leak():
    # the shell exits at once; its background sleep is re-parented
    subprocess.run(["sh", "-c", 'sleep 60 >/dev/null 2>&1 & echo $! >> "$PIDS"'], check=True)
""",
    "nothing": """
import multiprocessing, os, subprocess, threading
def test_clean():
    multiprocessing.get_context("spawn").Lock()  # starts the process-lifetime resource tracker
    subprocess.run(["true"], check=True)
    fd = os.open(os.devnull, os.O_RDONLY)
    os.close(fd)
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
""",
}


def run_guarded(tmp_path: Path, kind: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run pytest with the guard under CI=true on the `kind` test file.

    Returns:
        (the finished run, the file the leaking tests wrote the pids of their child processes to).
    """
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / f"test_{kind}.py").write_text(LEAKS[kind])
    pids = tmp_path / "pids"
    env = {**os.environ, "CI": "true", "PYTHONPATH": str(ROOT), "PIDS": str(pids)}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    return result, pids


def _kill(pids: Path) -> None:
    for line in pids.read_text().split() if pids.exists() else []:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(line), signal.SIGKILL)


@pytest.mark.parametrize(
    ("kind", "args", "named"),
    [
        ("fds", (), "/dev/null +"),
        ("threads", ("-n", "2"), "leaky-N +"),
        ("child", (), "sleep N +1"),
        ("orphan", ("-n", "2"), "sleep N +1"),
    ],
)
def test_a_leak_fails_the_run_and_is_named(
    tmp_path: Path, kind: str, args: tuple[str, ...], named: str
) -> None:
    result, pids = run_guarded(tmp_path, kind, *args)
    try:
        out = result.stdout + result.stderr
        assert result.returncode == pytest.ExitCode.TESTS_FAILED, out
        assert "1 passed" in out, out  # the test itself passed: the guard failed the run
        assert "resource leak over the session" in out, out
        assert named in out, out
        if args:
            assert "gw0: resource leak" in out or "gw1: resource leak" in out, out
    finally:
        _kill(pids)


def test_a_run_that_leaks_nothing_passes_and_reports_each_worker(tmp_path: Path) -> None:
    result, _ = run_guarded(tmp_path, "nothing", "-n", "2", "--resources")
    out = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.OK, out
    assert "resource leak" not in out, out
    assert "what each test module left behind in gw" in out, out
    assert "resources: fds" in out, out
    assert "multiprocessing.resource_tracker" in out, out  # shown, not counted
