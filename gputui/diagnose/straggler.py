"""Slow, not stuck: the straggler of a job, from the NVML samples the detector already has.

A rank that waits for a slower peer sits inside the collective for part of every step, and
a GPU inside a waiting collective looks the same whatever the reason: its kernel is resident
(util ~100 %) but moves little memory and draws little power. The straggler never waits.
So over a sliding window each GPU of a job gets a *wait share*: the fraction of its busy
samples (util >= 10 %) that show the collective-wait pattern. A job whose ranks' shares
differ strongly, with one rank (or a few) waiting much less than the rest, is slow, and
those ranks are its stragglers. A job whose ranks all wait alike is bottlenecked outside
the GPUs (an input pipeline, the network, the host), and no rank is to blame.

Thresholds, from real recordings (tests/data; docs/stragglers.md has the tables):

- 4 x H200, rank 0 doing 4x the matmuls: the waiting ranks read util 97-99, mem_util 6-8,
  power 318-340 W (46-49 % of 700 W); the straggler util 99, mem_util 22-24, ~690 W (99 %).
  With 16x the work the waiting ranks fall to mem_util ~2 and ~200 W.
- 2 x H200, healthy training: mem_util 20-24, ~690 W; a communication-only benchmark
  (1 GiB all_reduce back to back): mem_util 35-36 at util >= 90, ~290 W (42 %): never waiting.

WAIT_MEM_UTIL_MAX = 14 sits 6 points above the waiting ranks (8) and 6 below the lowest
busy level (training's 20); WAIT_POWER_FRAC_MAX = 0.6 sits 11 points of the limit above the
waiting ranks (49 %) and 26 below the straggler (86 %, 5th percentile). The power test is
skipped when the power or its limit is not reported, as the hang detector does.

The first answer needs MIN_SPAN_S (8 s) of busy samples of every rank, and the imbalance
must hold both over the whole window (up to WINDOW_S, 30 s) and over the last RECENT_S
(6 s): a warm-up whose ranks were uneven for a few seconds is not called slow, and a
straggler that catches up is dropped within RECENT_S. A mild imbalance (ranks waiting 10-20 %
of each step) never reaches the pattern: NVML averages over its sampling period, so such a
rank's samples read as busy.

Incremental: O(1) amortized per GPU per sample (deques with running counts), pure (the same
snapshots give the same answers), so replay and live agree.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from gputui.collect.model import GpuSample, Snapshot
from gputui.diagnose.groups import Group

WAIT_UTIL_MIN = 90.0  # a kernel is resident the whole sample (waiting ranks read 97-99)
WAIT_MEM_UTIL_MAX = 14.0  # waiting ranks 2-8; the straggler and training 20-24; comm 35-36
WAIT_POWER_FRAC_MAX = 0.6  # waiting ranks 28-49 % of the limit; the straggler ~97 %
BUSY_UTIL_MIN = 10.0  # below: no kernel (idle with a context), as classify.IDLE_UTIL_MAX

WINDOW_S = 30.0  # the shares are taken over at most this much history
RECENT_S = 6.0  # ...and must agree with the last few seconds (the imbalance still holds)
MIN_SPAN_S = 8.0  # busy history every rank needs before any answer
MIN_SAMPLES = 6  # ...and this many busy samples (at 1 Hz sampling, 8 s gives 8)
MIN_RECENT = 3  # busy samples of each rank in the recent part
STRAGGLER_SHARE_MAX = 0.25  # a straggler waits in at most a quarter of its busy samples
WAITER_SHARE_MIN = 0.5  # ...while the ranks that wait for it do in at least half
GAP_MIN = 0.4  # and the two groups' shares are this far apart at least
WAITING_LEAVE = 0.4  # a GPU counted as waiting (>= WAITER_SHARE_MIN) stops below this
BURST_GAP_S = 1.5  # a rank without a busy sample for this long has left its GPU idle
ALIKE_SPREAD_MAX = 0.25  # every rank waits, within this much of each other: no straggler

WAIT, BUSY = True, False
K = TypeVar("K")  # a GPU index here; "host:gpu" across nodes


def is_waiting(g: GpuSample) -> bool | None:
    """True: this sample shows the collective-wait pattern; False: busy otherwise; None:
    no kernel (idle, free) or the readings needed to tell are missing."""
    if g.util is None or g.util < BUSY_UTIL_MIN or not g.pids:
        return None
    if g.mem_util is None and g.power_frac is None:
        return None
    if g.util < WAIT_UTIL_MIN:
        return BUSY
    if g.mem_util is not None and g.mem_util > WAIT_MEM_UTIL_MAX:
        return BUSY
    frac = g.power_frac
    return WAIT if frac is None or frac <= WAIT_POWER_FRAC_MAX else BUSY


class _Counted:
    """Busy samples (time, waiting?) over a time window, with a running count of waits."""

    __slots__ = ("horizon", "items", "waits")

    def __init__(self, horizon: float) -> None:
        self.horizon = horizon
        self.items: deque[tuple[float, bool]] = deque()
        self.waits = 0

    def add(self, t: float, waiting: bool) -> None:
        self.items.append((t, waiting))
        self.waits += waiting

    def trim(self, now: float) -> None:
        while self.items and self.items[0][0] < now - self.horizon:
            self.waits -= self.items.popleft()[1]

    @property
    def share(self) -> float | None:
        return self.waits / len(self.items) if self.items else None

    @property
    def span(self) -> float:
        return self.items[-1][0] - self.items[0][0] if self.items else 0.0


@dataclass
class _GpuHistory:
    pids: frozenset[int]
    since: float  # first sample of this job on the GPU
    window: _Counted = field(default_factory=lambda: _Counted(WINDOW_S))
    recent: _Counted = field(default_factory=lambda: _Counted(RECENT_S))


@dataclass(frozen=True)
class Straggle:
    """One job's wait shares at a sample, and what they say.

    `stragglers` non-empty: the job is slow and these GPUs hold it back; `alike`: every rank
    waits about as much (the bottleneck is outside the GPUs). Neither: nothing to say.
    """

    key: str
    label: str | None
    shares: dict[int, float]  # GPU -> wait share over the window
    stragglers: tuple[int, ...] = ()
    waiters: tuple[int, ...] = ()
    alike: bool = False
    window_s: float = 0.0
    ranks: dict[int, int] = field(default_factory=dict)  # GPU -> global rank, where known
    pids: dict[int, tuple[int, ...]] = field(default_factory=dict)  # GPU -> its processes
    waiting: tuple[int, ...] = ()  # GPUs counted as waiting, with hysteresis

    @property
    def slow(self) -> bool:
        return bool(self.stragglers)


class WaitShares:
    """Feed it every snapshot (with the detector's groups); it returns each job's Straggle."""

    def __init__(self) -> None:
        self.gpus: dict[int, _GpuHistory] = {}
        self.waiting: set[int] = set()  # GPUs counted as waiting at the last judge()

    def observe(self, snap: Snapshot) -> None:
        """Account this sample's GPUs: O(1) amortized per GPU."""
        seen = set()
        for g in snap.gpus:
            seen.add(g.index)
            h = self.gpus.get(g.index)
            if h is None or (g.pids and h.pids.isdisjoint(g.pids)):
                h = self.gpus[g.index] = _GpuHistory(frozenset(g.pids), snap.t)  # a new job
            elif g.pids and h.pids != g.pids:
                h.pids = frozenset(g.pids)
            waiting = is_waiting(g)
            if waiting is not None:
                h.window.add(snap.t, waiting)
                h.recent.add(snap.t, waiting)
            h.window.trim(snap.t)
            h.recent.trim(snap.t)
        for i in set(self.gpus) - seen:
            del self.gpus[i]

    def judge(self, snap: Snapshot, groups: Iterable[Group]) -> list[Straggle]:
        """The Straggle of every job with two or more GPUs here and enough history."""
        out = []
        waiting: set[int] = set()
        for group in groups:
            if len(group.members) < 2:
                continue  # a lone process (most of a crowded node): nothing to compare
            present = group.present(snap)
            if len(present) < 2:
                continue
            s = self._judge(group, present, snap.t)
            if s is not None:
                # Hysteresis: a GPU starts to count as waiting at WAITER_SHARE_MIN and stops
                # below WAITING_LEAVE, so a share near the line does not flap.
                now = tuple(
                    i
                    for i, x in sorted(s.shares.items())
                    if x >= WAITER_SHARE_MIN or (i in self.waiting and x >= WAITING_LEAVE)
                )
                waiting.update(now)
                out.append(Straggle(**{**s.__dict__, "waiting": now}))
        self.waiting = waiting
        return out

    def _judge(self, group: Group, present: tuple[int, ...], now: float) -> Straggle | None:
        hist = {i: h for i in present if (h := self.gpus.get(i)) is not None}
        full = {
            i
            for i, h in hist.items()
            if h.window.span >= MIN_SPAN_S
            and len(h.window.items) >= MIN_SAMPLES
            and len(h.recent.items) >= MIN_RECENT
        }
        # A rank busy on its host CPU (its data loader, a CPU-bound step) launches few
        # kernels: here for MIN_SPAN_S with a kernel in the last RECENT_S, it may still be
        # the straggler, judged by its few busy samples. A rank with no kernel lately is not
        # progressing: that is the hang detector's case, and nothing is said here.
        sparse = {
            i
            for i, h in hist.items()
            if i not in full
            and now - h.since >= MIN_SPAN_S
            and h.recent.items
            and _bursts(h.window.items) >= 2  # it came back from idle: it runs in steps
        }
        if not full or len(full) + len(sparse) < len(present):
            return None
        shares = {i: h.window.share or 0.0 for i, h in hist.items()}
        recent = {i: h.recent.share or 0.0 for i, h in hist.items()}
        ranks = {gpu: r for r, gpu in group.ranks.values() if r is not None and gpu in shares}
        pids = {i: group.members[i].pids for i in present}
        span = max(hist[i].window.span for i in full)
        base = Straggle(group.key, group.label, shares, window_s=span, ranks=ranks, pids=pids)
        low, high, alike = split(shares, recent)
        if not sparse <= set(low):
            return None  # too few samples to say anything but "it holds the others back"
        if low:
            return Straggle(**{**base.__dict__, "stragglers": low, "waiters": high})
        return Straggle(**{**base.__dict__, "alike": True}) if alike else base


def _bursts(items: Iterable[tuple[float, bool]]) -> int:
    """Runs of busy samples separated by more than BURST_GAP_S without one. A rank that
    came back to its GPU after idling steps on; one that went idle once and stayed may hang."""
    n, last = 0, None
    for t, _ in items:
        n += last is None or t - last > BURST_GAP_S
        last = t
    return n


def split(
    shares: dict[K, float], recent: dict[K, float] | None = None
) -> tuple[tuple[K, ...], tuple[K, ...], bool]:
    """(stragglers, waiters, all alike) from wait shares (and, when given, the recent ones,
    which must agree): the rule of this module, also used across nodes by `gputui merge`."""
    recent = recent if recent is not None else shares
    keys = list(shares)
    low = tuple(k for k in keys if max(shares[k], recent[k]) <= STRAGGLER_SHARE_MAX)
    high = tuple(k for k in keys if min(shares[k], recent[k]) >= WAITER_SHARE_MIN)
    if low and high and len(low) <= len(high):
        if min(shares[k] for k in high) - max(shares[k] for k in low) >= GAP_MIN:
            return low, high, False
    alike = bool(keys) and len(high) == len(keys)
    alike = alike and max(shares.values()) - min(shares.values()) <= ALIKE_SPREAD_MAX
    return (), (), alike


def spans(ix: Iterable[int]) -> str:
    """1, 2, 3, 5 -> "1-3, 5": how a person writes a list of ranks."""
    out: list[str] = []
    xs = sorted(set(ix))
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(
            str(xs[i]) if j == i else f"{xs[i]}-{xs[j]}" if j > i + 1 else f"{xs[i]}, {xs[j]}"
        )
        i = j + 1
    return ", ".join(out)


def who(s: Straggle, gpus: Iterable[int]) -> str:
    """ "rank 0 (GPU 0)", "ranks 1-3 (GPUs 1-3)" or, when ranks are unknown, "GPUs 1-3"."""
    gpus = sorted(gpus)
    where = ("GPU " if len(gpus) == 1 else "GPUs ") + spans(gpus)
    if all(i in s.ranks for i in gpus):
        ranks = [s.ranks[i] for i in gpus]
        return ("rank " if len(ranks) == 1 else "ranks ") + spans(ranks) + f" ({where})"
    return where


def headline(s: Straggle) -> str:
    """The one sentence of a slow job, or of one whose ranks all wait alike."""
    job = f"job {s.label}: " if s.label else ""
    if s.slow:
        waiting = sum(s.shares[i] for i in s.waiters) / len(s.waiters)
        own = ", ".join(f"{s.shares[i]:.0%}" for i in s.stragglers)
        verb = "is the straggler" if len(s.stragglers) == 1 else "are the stragglers"
        wait, their = ("waits", "its") if len(s.waiters) == 1 else ("wait", "their")
        return (
            f"{job}slow: {who(s, s.stragglers)} {verb}; {who(s, s.waiters)} {wait} for it in "
            f"{waiting:.0%} of {their} samples ({own} for the straggler, over {s.window_s:.0f} s)"
        )
    if s.alike:
        mean = sum(s.shares.values()) / len(s.shares)
        return (
            f"{job}all ranks wait alike ({mean:.0%} of each step): the bottleneck is outside "
            "the GPUs (input pipeline, host CPU, network), not a straggler"
        )
    return ""


def straggles_over(snaps: Iterable[Snapshot]) -> list[Straggle]:
    """Each job's Straggle at the last of `snaps` (a replay's `snapshot --at`): the same
    bookkeeping as the detector's, run over the samples up to there."""
    from gputui.diagnose.groups import GroupMemory

    memory, shares = GroupMemory(), WaitShares()
    groups: list[Group] = []
    last: Snapshot | None = None
    for s in snaps:
        groups = memory.update(s)
        shares.observe(s)
        last = s
    return shares.judge(last, groups) if last is not None else []


def job_words(s: Straggle) -> str:
    """The wait shares of a job's GPUs on one line: `wait GPU 0 0%, GPU 1 98%; slow: ...`."""
    shares = ", ".join(f"GPU {i} {x:.0%}" for i, x in sorted(s.shares.items()))
    said = headline(s)
    return f"wait {shares}" + (f"; {said.split(': ', 1)[1] if s.label else said}" if said else "")


def straggle_to_json(s: Straggle) -> dict[str, object]:
    return {
        "job_key": s.key,
        "wait_share": {str(i): round(x, 3) for i, x in sorted(s.shares.items())},
        "stragglers": list(s.stragglers),
        "alike": s.alike,
    }
