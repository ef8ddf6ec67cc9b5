"""A death needs no clock: a rank's cause is quoted from the sample that misses it.

Real processes stand in for ranks 0 and 1 (GPU readings synthetic, tests/synth.py); rank 1
writes its stderr to a file and raises. The Watcher runs with `--stall-after 60`: before,
the last words were read only when the peers had spun for that long (8 s on CPU and 12 s on
the GPU machine with the default 10 s). Now the sample that first misses rank 1 starts the
lastwords gatherer, and the verdict of the next sample, half a second of job time after the
exit, names the cause, whether the peer already spins or still computes. A rank that leaves
with nothing to say while its peer computes (the end of a run) is no alarm.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from synth import with_real_pids
from two_ranks import TwoRanks
from waiting import wait_until

from gputui.diagnose import exitcodes
from gputui.watch.watcher import Watcher

RANK1 = textwrap.dedent(
    """\
    import sys

    def step():
        raise MemoryError("CUDA out of memory. Tried to allocate 400.00 GiB")

    print("ready", flush=True)
    if sys.stdin.readline().strip() == "raise":
        step()
    """
)


@pytest.fixture
def job(tmp_path: Path) -> Iterator[TwoRanks]:
    j = TwoRanks(tmp_path, RANK1)
    yield j
    j.close()


def after_exit(job: TwoRanks, how: bytes, peer: str, samples: int = 2) -> tuple[object, int]:
    """Healthy samples until the rank I/O tracker knows rank 1, rank 1 ends, then `samples`
    samples 0.25 s apart (0.5 s of job time after the exit for two) with the peer in state
    `peer`: the last one's verdict, once the gatherer started by the first has answered, and
    rank 1's exit code."""
    w = Watcher(60.0, 120.0, auto_dump=False, host_ranks=False)
    t = 1000.0
    try:
        w.update(with_real_pids(t, [job.r0.pid, job.r1.pid], ["compute", "compute"]))
        assert wait_until(lambda: w.rankio is not None and w.rankio.get(job.r1.pid))
        code = job.end_rank1(how)
        w.update(with_real_pids(t + 0.25, [job.r0.pid, None], [peer, "gone"]))
        assert w.wait(30), "the lastwords gatherer did not finish within its bounds"
        for i in range(2, samples + 1):
            v = w.update(with_real_pids(t + 0.25 * i, [job.r0.pid, None], [peer, "gone"]))
        return v, code
    finally:
        w.close()


@pytest.mark.parametrize("peer", ["spin", "compute"])
def test_a_rank_dead_of_an_error_is_quoted_half_a_second_after_its_exit(job, peer):
    v, code = after_exit(job, b"raise", peer)
    assert code == 1
    assert v.state == "stalled" and v.suspects == (1,)
    assert v.findings[0] == (
        f"rank 1 (pid {job.r1.pid}) died: CUDA out of memory. Tried to allocate "
        "400.00 GiB (train.py:4)"
    )
    assert v.ranked[0].strength.name == "RANK_GONE"
    assert exitcodes.of_state(v.state) == exitcodes.HANG


def test_a_rank_that_leaves_without_a_word_while_its_peer_computes_is_no_alarm(job):
    v, code = after_exit(job, b"done", "compute")
    assert code == 0
    assert v.state == "ok"
    assert f"rank 1 (pid {job.r1.pid}) has exited while its job runs on" in v.reason


def test_a_rank_that_leaves_without_a_word_while_its_peer_spins_is_called_at_once(job):
    """Its peer waits for it in a collective (1.5 s of spin: not the last reading of a run
    that ends): the death is plain, the words honest."""
    v, _ = after_exit(job, b"done", "spin", samples=8)
    assert v.state == "stalled" and v.suspects == (1,)
    assert v.findings[0].startswith(f"rank 1 (pid {job.r1.pid}) exited; no message found in its")
    assert str(job.log) in v.findings[0]
