"""The NCCL watchdog ends ranks 0-2 while rank 3 is stuck in its own code.

On CPU (gloo) there is no NCCL watchdog, so each waiting rank here is a real process that
writes the watchdog's own words, recorded on the GPU machine (tests/data/lastwords/
watchdog_rank0_excerpt.txt, its rank and its 10 s timeout set to the rank's and 20 s), to its
stderr file and then aborts (SIGABRT), as the watchdog does. Rank 3 is a real process spinning
in a Python loop of its own. GPU readings are synthetic (tests/synth.py): ranks 0-2 spin in
the collective, rank 3's GPU idles, then 0-2 vanish.

Before: rank 3 named, and the three deaths read either as causes ("rank 0 died: NCCL
watchdog ...") or not at all. Now the verdict stays stalled on rank 3, its line (py-spy)
first, and says "ranks 0-2 were ended by the NCCL watchdog after 20 s waiting for rank 3".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from synth import with_real_pids
from waiting import wait_until

from gputui.diagnose import exitcodes
from gputui.watch.watcher import Watcher

DATA = Path(__file__).parent / "data" / "lastwords" / "watchdog_rank0_excerpt.txt"

WAITER = """\
import os, sys
print("ready", flush=True)
sys.stdin.readline()
sys.stderr.write(open(sys.argv[1]).read())
sys.stderr.flush()
os.abort()
"""

STUCK = """\
import sys

def wait_for_flag(flags):
    while not flags.get("go"):
        pass

print("ready", flush=True)
wait_for_flag({})
"""


def watchdog_text(rank: int) -> str:
    text = DATA.read_text().split("== watchdog_rank1.txt")[0]
    text = text.replace("[rank0]", f"[rank{rank}]").replace("[Rank 0]", f"[Rank {rank}]")
    text = text.replace("Rank 0]", f"Rank {rank}]")
    return text.replace("Timeout(ms)=10000", "Timeout(ms)=20000").replace(
        "ran for 10002 milliseconds", "ran for 20002 milliseconds"
    )


def test_the_ranks_the_watchdog_ended_are_told_and_the_stuck_rank_stays_first(tmp_path):
    (tmp_path / "waiter.py").write_text(WAITER)
    (tmp_path / "stuck.py").write_text(STUCK)
    procs = []
    for r in range(3):
        (tmp_path / f"dog{r}.txt").write_text(watchdog_text(r))
        with open(tmp_path / f"rank{r}.err", "wb") as err:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "waiter.py", f"dog{r}.txt"],
                    cwd=tmp_path,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                )
            )
    with open(tmp_path / "rank3.err", "wb") as err:
        procs.append(
            subprocess.Popen(
                [sys.executable, "stuck.py"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=err
            )
        )
    pids = [p.pid for p in procs]
    w = Watcher(10.0, 120.0, auto_dump=True, host_ranks=False)
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        t = 1000.0
        w.update(with_real_pids(t, pids, ["compute"] * 4))
        assert wait_until(lambda: w.rankio is not None and all(w.rankio.get(p) for p in pids))
        for _ in range(45):  # ranks 0-2 spin 11 s for rank 3: stalled, rank 3 the suspect
            t += 0.25
            v = w.update(with_real_pids(t, pids, ["spin", "spin", "spin", "idle"]))
        assert v.state == "stalled" and v.suspects == (3,)
        assert w.wait(60)
        for p in procs[:3]:  # the watchdog fires on each waiting rank
            assert p.stdin is not None
            p.stdin.write(b"timeout\n")
            p.stdin.close()
            assert p.wait(timeout=30) < 0  # SIGABRT
        gone = [None, None, None, pids[3]]
        w.update(with_real_pids(t + 0.25, gone, ["gone", "gone", "gone", "idle"]))
        assert w.wait(60)
        v = w.update(with_real_pids(t + 0.5, gone, ["gone", "gone", "gone", "idle"]))
        assert w.wait(60)
        v = w.update(with_real_pids(t + 0.75, gone, ["gone", "gone", "gone", "idle"]))
    finally:
        w.close()
        for p in procs:
            p.kill()
            p.wait(timeout=10)
    assert v.state == "stalled" and v.suspects == (3,)
    assert exitcodes.of_state(v.state) == exitcodes.HANG
    said = "ranks 0-2 were ended by the NCCL watchdog after 20 s waiting for rank 3"
    assert said in v.findings
    first = v.ranked[0]
    assert first.ranks == (3,), v.findings  # the culprit stays first
    assert not any(f.startswith("rank 0") and "died" in f for f in v.findings)
    assert v.evidence["lastwords"]["watchdog"] == {
        "ended": [0, 1, 2],
        "after_s": 20.0,
        "waited_for": [3],
        "pids": [pids[3]],
    }


def test_a_rank_that_died_because_its_peer_went_away_does_not_lead():
    """The recorded DDP case (1 x H100, tests/data/lastwords): rank 1 raised; rank 0 died 20 s
    later of NCCL's "remote process exited". Both gone: rank 1's own error leads, rank 0's
    death is context."""
    from gputui.diagnose.gone.explain import explain_lastwords
    from gputui.diagnose.verdict import Verdict

    data = DATA.parent
    rec = {
        "ranks": [
            {
                "pid": 5,
                "rank": 0,
                "gone": True,
                "seen": True,
                "tail": (data / "ddp_unused_rank0.txt").read_text(),
            },
            {
                "pid": 6,
                "rank": 1,
                "gone": True,
                "seen": True,
                "tail": (data / "ddp_unused_rank1.txt").read_text(),
            },
        ]
    }
    ev = explain_lastwords(rec, Verdict(t=1.0), None)
    first = max(ev.ranked, key=lambda f: f.strength)
    assert first.ranks == (1,) and "Expected to have finished reduction" in first.text
    peer = next(f for f in ev.ranked if f.ranks == (0,))
    assert peer.strength.name == "CONTEXT" and "died when a peer went away" in peer.text
