"""A rank's last words come from its own files, not only from its stderr.

Each case runs real processes and the real Watcher (GPU readings synthetic, tests/synth.py),
with `--stall-after 60`: the death alone calls the job (gputui.watch.deaths).

- `torchrun --log-dir D --redirect 3` gives each rank its own stdout.log and stderr.log; rank
  1 logs its traceback through `logging` to stdout, so its stderr.log holds nothing useful.
  Its words come from its stdout.log (before: "exited; no message found").
- a rank that keeps its own log (`logging.FileHandler`), its fds 1 and 2 on pipes: the
  words come from that file.
- nothing anywhere: the sentence lists every file looked in.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from conftest import end_launcher
from synth import with_real_pids
from waiting import wait_until

from gputui.watch.watcher import Watcher

RANK = textwrap.dedent(
    """\
    import logging, os, sys, time
    rank = int(os.environ.get("RANK", sys.argv[1] if len(sys.argv) > 1 else "0"))
    to = sys.argv[2] if len(sys.argv) > 2 else "stdout"
    handler = logging.StreamHandler(sys.stdout)
    if to == "file":
        handler = logging.FileHandler(f"rank{rank}.log")
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    log = logging.getLogger("train")

    def step():
        raise RuntimeError("NaN in loss at step 1207")

    log.info("ready")
    while rank == 1 and not os.path.exists("go"):
        time.sleep(0.05)
    if rank == 1:
        try:
            step()
        except Exception:
            log.exception("step failed")
            logging.shutdown()
            sys.exit(1)
    time.sleep(600)
    """
)
RAISED_AT = next(i for i, ln in enumerate(RANK.splitlines(), 1) if "raise RuntimeError" in ln)


def watch_death(tmp: Path, r0: int, r1: int) -> object:
    """Rank 1 (pid r1) is told to fail once the tracker knows it; the verdict half a second of
    job time after the exit, rank 0 spinning."""
    w = Watcher(60.0, 120.0, auto_dump=False, host_ranks=False)
    t = 1000.0
    try:
        w.update(with_real_pids(t, [r0, r1], ["compute", "compute"]))
        assert wait_until(lambda: w.rankio is not None and w.rankio.get(r1) is not None)
        (tmp / "go").write_text("")
        assert wait_until(
            lambda: not psutil.pid_exists(r1) or psutil.Process(r1).status() == "zombie"
        )
        w.update(with_real_pids(t + 0.25, [r0, None], ["spin", "gone"]))
        assert w.wait(30)
        return w.update(with_real_pids(t + 0.5, [r0, None], ["spin", "gone"]))
    finally:
        w.close()


@pytest.mark.torch  # starts torch ranks: skipped at collection without torch
def test_a_torchrun_rank_is_quoted_from_its_own_stdout_log(tmp_path):
    (tmp_path / "train.py").write_text(RANK)
    logs = tmp_path / "logs"
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--monitor-interval",
            "120",
            "--log-dir",
            str(logs),
            "--redirect",
            "3",
            "train.py",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        ranks: dict[int, int] = {}

        def both_ready() -> bool:
            for c in psutil.Process(agent.pid).children():
                try:
                    env = c.environ()
                except psutil.Error:
                    continue
                if "RANK" in env:
                    ranks[int(env["RANK"])] = c.pid
            outs = list(logs.glob("*/attempt_0/*/stdout.log"))
            return (
                len(ranks) == 2 and len(outs) == 2 and all("ready" in o.read_text() for o in outs)
            )

        assert wait_until(both_ready, 120), "torchrun's two ranks did not start"
        v = watch_death(tmp_path, ranks[0], ranks[1])
        assert v.state == "stalled" and v.suspects == (1,)
        assert v.findings[0] == (
            f"rank 1 (pid {ranks[1]}) died: RuntimeError: NaN in loss at step 1207 "
            f"(train.py:{RAISED_AT})"
        )
        entry = next(e for e in v.evidence["lastwords"]["ranks"] if e["rank"] == 1)
        assert entry["log"].endswith("/attempt_0/1/stdout.log")
    finally:
        end_launcher(agent)  # and its ranks: rank 0 would sleep on for 600 s


def start(tmp: Path, rank: int, to: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "train.py", str(rank), to],
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_a_rank_with_its_own_log_file_is_quoted_from_it(tmp_path):
    (tmp_path / "train.py").write_text(RANK)
    r0, r1 = start(tmp_path, 0, "file"), start(tmp_path, 1, "file")
    try:
        assert wait_until(
            lambda: all(
                (tmp_path / f"rank{r}.log").exists()
                and "ready" in (tmp_path / f"rank{r}.log").read_text()
                for r in (0, 1)
            )
        )
        v = watch_death(tmp_path, r0.pid, r1.pid)
        assert v.findings[0] == (
            f"rank 1 (pid {r1.pid}) died: RuntimeError: NaN in loss at step 1207 "
            f"(train.py:{RAISED_AT})"
        )
        entry = next(e for e in v.evidence["lastwords"]["ranks"] if e["rank"] == 1)
        assert entry["log"] == str(tmp_path / "rank1.log")
    finally:
        for p in (r0, r1):
            p.kill()
            p.wait(timeout=10)


def test_no_words_anywhere_names_every_file_looked_in(tmp_path):
    """Rank 1 is killed (SIGKILL) before a word: its stderr pipe, and its log file, named."""
    (tmp_path / "train.py").write_text(RANK)
    r0, r1 = start(tmp_path, 0, "file"), start(tmp_path, 1, "file")
    try:
        assert wait_until(lambda: (tmp_path / "rank1.log").exists())
        w = Watcher(60.0, 120.0, auto_dump=False, host_ranks=False)
        try:
            w.update(with_real_pids(1000.0, [r0.pid, r1.pid], ["compute", "compute"]))
            assert wait_until(
                lambda: (
                    w.rankio is not None
                    and w.rankio.get(r1.pid) is not None
                    and w.rankio.get(r1.pid).logs
                )
            )
            r1.kill()
            r1.wait(timeout=10)
            w.update(with_real_pids(1000.25, [r0.pid, None], ["spin", "gone"]))
            assert w.wait(30)
            for i in range(2, 9):  # the peer spins 2 s for it: a wordless death is plain
                v = w.update(with_real_pids(1000 + 0.25 * i, [r0.pid, None], ["spin", "gone"]))
        finally:
            w.close()
        assert v.findings[0].startswith(f"rank 1 (pid {r1.pid}) exited; no message found")
        assert str(tmp_path / "rank1.log") in v.findings[0]
    finally:
        for p in (r0, r1):
            p.kill()
            p.wait(timeout=10)
