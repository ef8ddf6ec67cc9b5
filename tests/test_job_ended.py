"""Why a job whose every rank is gone ended (gputui/diagnose/gone/ended.py), from real words.

- torchrun-vanish-cpu.out: a real torchrun job of 3 gloo ranks on CPU (the default monitor
  interval), rank 1 raised; the agent sent SIGTERM to ranks 0 and 2 and wrote its report. The
  three ranks shared this one output.
- h200x4_watchdog_rank*.err: what each rank of the 4 x H200 watchdog case wrote.
"""

from __future__ import annotations

import re
from pathlib import Path

from gputui.diagnose.gone.ended import job_ended
from gputui.diagnose.ranking import Strength

DATA = Path(__file__).parent / "data" / "lastwords"
SHARED = (DATA / "torchrun-vanish-cpu.out").read_text()
PIDS = {0: 20605, 1: 20606, 2: 20607}  # as the agent's report names them


def record(tails: dict[int, str], pids: dict[int, int]) -> dict:
    return {
        "ranks": [
            {
                "pid": pids[r],
                "rank": r,
                "gone": True,
                "seen": True,
                "log": "/job/job.out",
                "tail": t,
            }
            for r, t in tails.items()
        ]
    }


def test_the_rank_that_raised_leads_and_the_ones_its_launcher_stopped_follow():
    ended = job_ended(
        record(dict.fromkeys(PIDS, SHARED), PIDS), set(PIDS.values()), "torchrun (pid 20589)"
    )
    assert ended is not None
    assert ended.headline == "rank 1 died: RuntimeError: loss is NaN at step 1207 (tr.py:9)"
    assert ended.findings[0].strength == Strength.RANK_GONE and ended.pid == PIDS[1]
    assert ended.findings[1].text == (
        "ranks 0, 2 were ended by their launcher, torchrun (pid 20589), without words of their own"
    )
    assert ended.extra["quiet"] == [0, 2]


def test_without_rank_marks_the_launchers_report_tells_who_raised():
    """The same output with torch's `[rankN]:` marks removed (as a plain redirect or an older
    torch writes it): every rank's tail holds the traceback; the agent's report says it sent
    SIGTERM to ranks 0 and 2."""
    plain = re.sub(r"^\[rank\d+\]:\s?", "", SHARED, flags=re.M)
    ended = job_ended(record(dict.fromkeys(PIDS, plain), PIDS), set(PIDS.values()))
    assert ended is not None and ended.rank == 1, ended
    assert ended.findings[-1].text == "ranks 0, 2 ended with the job, without words of their own"


def test_ranks_the_watchdog_ended_name_the_rank_that_never_entered_the_collective():
    pids = {r: 4605 + r for r in range(4)}
    tails = {r: (DATA / f"h200x4_watchdog_rank{r}.err").read_text() for r in range(4)}
    ended = job_ended(record(tails, pids), set(pids.values()))
    assert ended is not None
    assert ended.headline == (
        "ranks 0-2 were ended by the NCCL watchdog after 20 s waiting for rank 3 "
        "(collective #4, which rank 3 never entered)"
    )
    assert ended.extra["watchdog"]["waited_for"] == [3]


def test_a_job_whose_ranks_left_no_words_of_a_death_ended_normally():
    warning = (
        "[rank2]:[W1128 21:17:40.321818395 TCPStore.cpp:125] [c10d] recvValue failed on "
        "SocketImpl(fd=67): Failed to recv, got 0 bytes. Connection was likely closed.\n"
        "Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:682\n"
    )
    tails = {0: "", 1: "step 100 loss 0.1\n", 2: warning}
    assert job_ended(record(tails, PIDS), set(PIDS.values())) is None
