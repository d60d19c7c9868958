"""The capacity benchmark's profiler (``mcpq.ops.bench.thread_profile``), on a small program of
its own: turned on through the environment alone, it profiles every thread of a process that runs
mcpq's worker module, and a forked child's, cleared and dumped on the benchmark's signals; any
other process is left alone. Correctness only: no timing is asserted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpq.ops.bench import thread_profile
from mcpq.ops.bench.memory import process_tree
from mcpq.ops.harness.stack import REPO

#: Work in a thread and in a forked child, each in a function of its own name, called over and
#: over (only calls that return within the window are counted).
PROGRAM = """
import os, sys, threading, time

def in_a_thread():
    return sum(i * i for i in range(2000))

def in_the_child():
    return sorted(range(3000), key=lambda i: -i)[0]

def loop(step):
    while True:
        step()
        time.sleep(0.001)

threading.Thread(target=loop, args=(in_a_thread,), daemon=True, name="worker-thread").start()
if os.fork() == 0:
    # (one write each: unbuffered, print writes the word and its newline apart, and the two
    # processes' words could meet on one line)
    os.write(1, b"ready\\n")  # its after-fork work done: a signal from now on is seen
    loop(in_the_child)
os.write(1, b"ready\\n")
loop(lambda: time.sleep(0.01))
"""


def spawn(env: dict[str, str], *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", PROGRAM, *argv],
        env=env,
        cwd=str(REPO),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.fixture
def hooked(tmp_path: Path) -> Iterator[tuple[dict[str, str], Path]]:
    directory = tmp_path / "profile"
    env = {**os.environ, **thread_profile.hook_env(directory, str(REPO))}
    yield env, directory


def stop(process: subprocess.Popen[str]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    if process.stdout is not None:
        process.stdout.close()


def test_every_thread_and_a_forked_child_are_profiled(
    hooked: tuple[dict[str, str], Path],
) -> None:
    env, directory = hooked
    process = spawn(env, thread_profile.WORKER_MODULE)  # on its command line: profiled
    try:
        assert process.stdout is not None
        assert [process.stdout.readline().strip() for _ in "12"] == ["ready", "ready"]
        pids = process_tree(process.pid)
        assert len(pids) == 2, pids
        assert thread_profile.reset(pids, directory) == 2
        time.sleep(0.5)
        files = thread_profile.dump(pids, directory)
    finally:
        stop(process)
    assert sorted(files) == sorted(directory / f"profile-{pid}.pstats" for pid in pids)
    stats = thread_profile.merge(files)
    names = {
        entry.function.rsplit("(", 1)[-1].rstrip(")") for entry in thread_profile.top(stats, 500)
    }
    assert {"in_a_thread", "in_the_child"} <= names, sorted(names)
    assert thread_profile.total_s(stats) > 0
    ranked = thread_profile.top(stats, 5)
    assert [e.own_s for e in ranked] == sorted((e.own_s for e in ranked), reverse=True)
    cumulative = thread_profile.top(stats, 5, by="cumulative")
    assert all(e.cumulative_s >= e.own_s for e in cumulative)


def test_a_process_not_running_the_worker_is_left_alone(
    hooked: tuple[dict[str, str], Path],
) -> None:
    env, _directory = hooked
    probe = "import signal, sys; print(signal.getsignal(signal.SIGRTMIN + 3), sys.getprofile())"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.split() == ["0", "None"], done.stdout + done.stderr  # SIG_DFL, none
