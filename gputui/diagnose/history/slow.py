"""Stragglers over a window: gputui.diagnose.slow's rule (is_waiting per sample, split of the
wait shares) asked of a job's history, across nodes.

Each GPU's wait share is the fraction of its busy steps in the collective-wait pattern (or
clearly lighter than the job's busiest GPU at that step); the straggler waits in few while
its peers wait in most. Judged over the steps before the job's first stall (a stalled job's
culprit is a suspect, not a straggler), and again over the last fifth of those steps, which
must agree, as the live rule's recent part must.
"""

from __future__ import annotations

from gputui.collect.prom.columns import History
from gputui.diagnose.history.judge import JobReport
from gputui.diagnose.history.samples import GpuReader
from gputui.diagnose.slow.straggler import BUSY_UTIL_MIN, MIN_RECENT, MIN_SAMPLES, is_waiting, split


def judge_slow(hist: History, reports: list[JobReport], readers: list[GpuReader]) -> None:
    """Fill each report's stragglers (host:gpu) and its sentence, where the rule names any."""
    index = {g.key: i for i, g in enumerate(hist.gpus)}
    for rep in reports:
        members = [index[k] for k in rep.gpus]
        if len(members) < 2:
            continue
        stop = hist.n
        if rep.onset is not None:
            stop = max(0, round((rep.onset - hist.start) / hist.step))
        recent_from = stop - max(MIN_RECENT, (stop + 4) // 5)
        busy = dict.fromkeys(members, 0)
        waits = dict.fromkeys(members, 0)
        rbusy = dict.fromkeys(members, 0)
        rwaits = dict.fromkeys(members, 0)
        for k in range(stop):
            samples = {i: readers[i].sample(k) for i in members if readers[i].present(k)}
            on = [s for s in samples.values() if s.util is not None and s.util >= BUSY_UTIL_MIN]
            if len(on) < 2:
                continue
            fracs = [f for s in on if (f := s.power_frac) is not None]
            mems = [s.mem_util for s in on if s.mem_util is not None]
            ref = (max(fracs) if fracs else None, max(mems) if mems else None)
            for i, s in samples.items():
                w = is_waiting(s, ref)
                if w is None:
                    continue
                busy[i] += 1
                waits[i] += w
                if k >= recent_from:
                    rbusy[i] += 1
                    rwaits[i] += w
        if any(busy[i] < MIN_SAMPLES or rbusy[i] < MIN_RECENT for i in members):
            continue
        keys = {i: hist.gpus[i].key for i in members}
        shares = {keys[i]: waits[i] / busy[i] for i in members}
        recent = {keys[i]: rwaits[i] / rbusy[i] for i in members}
        low, high, _alike = split(shares, recent)
        if low:
            rep.stragglers = list(low)
            lo = max(shares[k] for k in low)
            hi = min(shares[k] for k in high)
            rep.slow_text = (
                f"SLOW     job {rep.key}: straggler {', '.join(low[:4])}"
                f"{' ...' if len(low) > 4 else ''} waits in {lo:.0%} of its busy samples or "
                f"fewer while {len(high)} peer GPU(s) wait in {hi:.0%} or more: the others "
                "wait for it"
            )
