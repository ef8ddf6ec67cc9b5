"""NCCL RAS asked from the start of a spin and again while it lasts (gputui/watch/ras_poll.py).

The ranks are real Python processes whose environment names the RAS address; RAS is the
test's TCP server (tests/ras_server.py) answering with NCCL's own answers, behind rank 0's own
listener where the answer must be evidence (only a rank's listener is trusted): the real
2-rank mismatch captured on an H100 (tests/data/ras/onegpu/), or the constructed 4-rank one whose
counts the test moves. The GPU readings are synthetic (tests/synth.py), the Watcher real.

Covers: RAS is asked before the stall is called (trigger "spin") and again while the job
stays stalled; the captured mismatch becomes the headline; counts that advance between two
answers make the verdict ok ("busy, not stalled") and no stack dump is started; a RAS that
answers garbage, or nothing, is one CONTEXT finding and the headline stays NVML's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from ras_server import free_ras_port, ras_server, relayed_ranks
from synth import with_real_pids

from gputui.diagnose.ranking import Strength
from gputui.watch.watcher import Watcher

DATA = Path(__file__).parent / "data" / "ras"
MASTER = "h:7"


def answers_with_counts(step: int, n: int) -> list[bytes]:
    """`n` answers of the 4-rank 'behind' job in which every count grows by `step` each time."""
    text = (DATA / "behind-4rank.json").read_text()
    doc = json.loads(text.removeprefix("OK\n"))  # NCCL's "OK" to SET FORMAT json first
    out = []
    for i in range(n):
        for comm in doc["communicators"]:
            for r in comm["ranks"]:
                counts = r["collective_counts"]
                for op in counts:
                    counts[op] += step if i else 0
        out.append(("OK\n" + json.dumps(doc, indent=1)).encode())
    return out


def watch_spin(w: Watcher, pids: list[int], until, timeout: float = 20.0) -> list:
    """Feed spinning samples (synthetic time, 0.25 s apart, after 0.5 s of compute) until
    `until(verdicts)` holds; the verdicts, or an AssertionError after `timeout` s."""
    t, out = 1000.0, []
    for _ in range(2):
        out.append(w.update(with_real_pids(t, pids, ["compute"] * len(pids), master=MASTER)))
        t += 0.25
    deadline = time.monotonic() + timeout
    while not until(out):
        assert time.monotonic() < deadline, [v.reason for v in out[-3:]]
        out.append(w.update(with_real_pids(t, pids, ["spin"] * len(pids), master=MASTER)))
        t += 0.25
        assert w.wait(5.0)  # the answer asked at this sample is in before the next one
    return out


def poller(stall_after: float = 2.0) -> Watcher:
    w = Watcher(stall_after, 60.0, auto_dump=False, host_ranks=False)
    assert w.ras is not None
    w.ras.interval = 0.0  # ask at every sample (live: every 3 s), so the test is ordered
    return w


def test_ras_is_asked_before_the_stall_and_again_while_the_job_stays_stalled(spawn):
    backend = free_ras_port()
    kids = relayed_ranks(spawn, backend)  # rank 0 holds the RAS port, as NCCL's thread does
    pids = [k.pid for k in kids]
    records: list[dict] = []
    with ras_server(*answers_with_counts(0, 50), port=backend):
        w = poller()
        try:
            job = with_real_pids(0.0, pids, ["spin"] * 2, master=MASTER).jobs[0].key
            vs = watch_spin(w, pids, lambda vs: vs[-1].alarm and w.records.count(job, "ras") >= 3)
            records = w.take_records()
        finally:
            w.close()
    ras = [r for r in records if r["type"] == "ras"]
    assert ras[0]["trigger"] == "spin"  # asked as the spin began, before stall_after
    assert any(r["trigger"] == "stalled" for r in ras)  # and again while stalled
    assert [len(r["ras"]["queries"]) for r in ras[:2]] == [1, 2]  # each carries the previous
    assert ras[0]["ras"]["queries"][0]["listener"].endswith(f"pid {pids[0]}")  # rank 0's own
    assert vs[-1].state == "stalled"
    # Two equal answers confirm who is behind: a RAS_BEHIND finding, above the NVML picture.
    top = vs[-1].ranked[0]
    assert top.strength == Strength.RAS_BEHIND and top.source == "ras", vs[-1].ranked
    assert vs[-1].reason == top.text


def test_the_real_captured_mismatch_is_the_headline(spawn):
    answer = (DATA / "onegpu" / "ras-onegpu-mismatch-json.txt").read_bytes()
    with ras_server(b"") as srv:
        port = srv.port
    kids = [spawn({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}) for _ in range(2)]
    with ras_server(*[answer] * 50, port=port):
        w = poller()
        try:
            vs = watch_spin(w, [k.pid for k in kids], lambda vs: vs[-1].alarm and vs[-1].ranked)
        finally:
            w.close()
    v = vs[-1]
    assert v.reason.startswith("ranks in different collectives (NCCL RAS): rank 1"), v.reason
    assert v.ranked[0].strength == Strength.MISMATCH and v.ranked[0].ranks == (1,)
    assert v.next_steps[0].startswith("The ranks called different collectives (rank 1 (")


def test_collectives_that_advance_are_a_busy_job_not_a_stall(spawn):
    backend = free_ras_port()
    kids = relayed_ranks(spawn, backend)  # rank 0 holds the RAS port, as NCCL's thread does
    with ras_server(*answers_with_counts(7, 80), port=backend):
        w = poller()
        try:
            vs = watch_spin(
                w,
                [k.pid for k in kids],
                lambda vs: len(vs) > 14 and "busy" in vs[-1].reason,
            )
        finally:
            w.close()
    v = vs[-1]
    assert v.state == "ok" and not v.alarm
    assert v.reason.startswith("busy, not stalled: NCCL RAS shows its collectives"), v.reason
    assert v.evidence["ras"]["progress"]  # the counts, for scripts
    assert w.transitions == 0  # nothing was dumped: a busy job is left alone
    # Each RAS answer has new counts, but the verdict a person or a script sees is steady:
    # `check --json` prints a line when the key changes, not every 3 s for a healthy job.
    busy = [x for x in vs if "busy" in x.reason and x.spinning]
    assert len(busy) > 1 and len({x.key() for x in busy}) == 1


@pytest.mark.parametrize(
    "script", [[b"garbage\x00\xff" * 10], ["close"]], ids=["garbage", "hangup"]
)
def test_a_ras_that_answers_garbage_or_nothing_is_one_context_line(spawn, script, tmp_path):
    lib = tmp_path / "libnccl.so.2.28.9"  # the ranks map it: they have loaded NCCL
    lib.write_bytes(b"\0" * 4096)
    code = f"import mmap\nf = open({str(lib)!r}, 'rb')\nm = mmap.mmap(f.fileno(), 4096, prot=1)\n"
    with ras_server(b"") as srv:
        port = srv.port
    kids = [spawn({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}, code=code) for _ in range(2)]
    with ras_server(*script, port=port):
        w = poller()
        try:
            vs = watch_spin(w, [k.pid for k in kids], lambda vs: vs[-1].alarm and vs[-1].findings)
        finally:
            w.close()
    v = vs[-1]
    ras = [f for f in v.ranked if f.source == "ras"]
    assert len(ras) == 1 and ras[0].strength == Strength.CONTEXT, v.ranked
    assert ras[0].text.startswith("NCCL RAS"), ras[0].text
    # Nothing beat NVML: the headline is the detector's own sentence.
    assert "spinning in a collective" in v.reason


class SpinningRanks:
    """A live source for `gputui record`'s loop: samples taken now (Unix time) naming real
    processes on GPUs that compute for `calm` samples, then spin."""

    kind, description = "nvml", "real processes, synthetic GPUs"

    def __init__(self, pids: list[int], calm: int, spin: int) -> None:
        self.pids, self.states = pids, [["compute"] * 2] * calm + [["spin"] * 2] * spin

    def sample(self):
        if not self.states:
            return None
        return with_real_pids(time.time(), self.pids, self.states.pop(0), master=MASTER)

    def next_delay(self) -> float:
        return 0.1

    def close(self) -> None:
        pass


def test_recorded_ras_answers_replay_to_the_same_findings(spawn, tmp_path):
    import threading

    from gputui.collect.trace.format import TraceWriter, read_trace
    from gputui.commands.record import write_samples

    with ras_server(b"") as srv:
        port = srv.port
    kids = [spawn({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}) for _ in range(2)]
    pids = [k.pid for k in kids]
    path = tmp_path / "rec.jsonl.gz"
    writer, live = TraceWriter(path), Watcher(1.0, 60.0, auto_dump=False, host_ranks=False)
    assert live.ras is not None
    live.ras.interval = 0.3
    try:
        with ras_server(*answers_with_counts(0, 100), port=port):
            write_samples(SpinningRanks(pids, 5, 30), writer, live, 0.1, None, threading.Event())
            live.wait(5.0)
    finally:
        live.close()
        writer.close()
    now = live.latest()
    assert now is not None and now.alarm and writer.records >= 2
    back = read_trace(path)
    replay = Watcher(1.0, 60.0, live=False)
    verdicts = [replay.update(s) for s in back]
    assert replay.ras is None and replay.transitions == 0  # a replay asks nothing
    assert verdicts[-1].findings == now.findings and verdicts[-1].reason == now.reason
    assert any(r["type"] == "ras" for s in back for r in s.records)
