"""A rank that exits is gone at once, whatever NVML still lists: it is not shown as a process
of "another PID namespace" (which made its whole node one job, and dropped the death just
called), and what was learnt of it while it lived (where it wrote) is kept.

Seen in CI: `check` called a DataLoader death, then "ok", then the death again without its
cause ("pid N exited; no message found (where it wrote is unknown: its process has exited)").
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from synth import with_real_pids

from gputui.collect.model import ProcessInfo, RankInfo
from gputui.collect.procs.jobs import group_jobs
from gputui.collect.procs.rank_tracker import RankIOTracker
from gputui.collect.procs.reader import ProcessReader


def _sleeper(stdout=subprocess.DEVNULL) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=stdout)


def test_a_listed_pid_that_was_read_alive_and_exited_is_not_shown():
    rank = _sleeper()
    reader = ProcessReader()
    try:
        (alive,) = reader.read({rank.pid: ((1,), 512.0)})
        assert alive.name.startswith("python") and alive.create_time is not None
        rank.kill()
        rank.wait(timeout=10)
        assert reader.read({rank.pid: ((1,), 512.0)}) == []  # NVML lists it a moment longer
        assert reader.read({rank.pid: ((1,), 512.0)}) == []  # ...and again
        assert group_jobs(reader.read({rank.pid: ((1,), 512.0)})) == ()
    finally:
        if rank.poll() is None:
            rank.kill()


def test_a_pid_never_seen_alive_is_still_listed_as_not_visible():
    """A pid NVML lists that this host never saw (another PID namespace) stays in the
    table, with a note: only a process read here alive and gone since is left out."""
    gone = _sleeper()
    gone.kill()
    gone.wait(timeout=10)
    (shown,) = ProcessReader().read({gone.pid: ((0,), 100.0)})
    assert shown.name == "(not visible from here: other PID namespace?)"


def test_a_rank_that_exited_keeps_where_it_wrote(tmp_path):
    log = tmp_path / "rank1.log"
    with open(log, "wb") as f:
        rank = _sleeper(stdout=f)
    tracker = RankIOTracker(every=0.0)
    try:
        tracker.refresh_now(with_real_pids(time.time(), [None, rank.pid], ["spin", "spin"]))
        rank.kill()
        rank.wait(timeout=10)
        # Listed once more after its exit: its start time can no longer be read
        snap = with_real_pids(time.time(), [None, None], ["spin", "spin"])
        ghost = ProcessInfo(
            pid=rank.pid,
            create_time=None,
            gpus=(1,),
            rank=RankInfo(rank=1, local_rank=1, world_size=2, local_world_size=2, master="h:1"),
        )
        snap = replace(snap, processes=(ghost,), jobs=group_jobs([ghost]))
        tracker.refresh_now(snap)
        io = tracker.final(rank.pid)
    finally:
        tracker.close()
        if rank.poll() is None:
            rank.kill()
    assert io is not None and io.error is None, io
    assert io.stdout.kind == "file" and io.stdout.path == str(log)


QUIT = """
import sys, threading, time
import gputui.collect.procs.hostranks as H
import gputui.collect.procs.rank_tracker as T
from synth import with_real_pids
started = threading.Event()
def slow(*_a, **_k):
    started.set()
    time.sleep(60)
H.read_rank = slow  # a scan of /proc that takes a minute (a loaded node)
T.resolve = slow
H.HostRankScanner().poke()
T.RankIOTracker().observe(with_real_pids(time.time(), [None, int(sys.argv[1])], ["spin", "spin"]))
started.wait(30)
print("leaving", flush=True)
"""


def test_quitting_never_waits_for_a_look_at_the_hosts_processes():
    """`q` ends the dashboard at once: a scan of /proc or a rank's look still under way
    (slow on a loaded node) does not hold the interpreter's exit (CI: 2 s after `q`)."""
    rank = _sleeper()
    try:
        t = time.monotonic()
        r = subprocess.run(
            [sys.executable, "-c", QUIT, str(rank.pid)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).parent,
        )
        took = time.monotonic() - t
    finally:
        rank.kill()
        rank.wait(timeout=10)
    assert r.returncode == 0 and r.stdout.strip() == "leaving", r.stderr
    assert took < 20, took  # not the minute the look would take
