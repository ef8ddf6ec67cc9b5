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

Each rank is judged against its peers in the same job, not only against fixed cuts: a
sample also counts as waiting when the GPU is clearly lighter than the job's busiest GPU at
that sample (REL_POWER_GAP of its limit less power and REL_MEM_GAP points less memory
traffic). Measured on 4 x H200 with a 2.5x straggler, a waiting rank drew 434 W (62 % of its
limit) against the straggler's 693 W: over the fixed 60 % cut, so the old rule named it a
straggler beside the real one; 0.62 is 0.37 below the straggler's 0.99, far past the gap.

A verdict holds while its cause holds (`_Hold`): once a set of stragglers is named it stays
named while the rule fails for up to HOLD_S, and another set replaces it only after being
named SWITCH_S without a break, so a share hovering at a margin gives one steady state rather
than "slow, ok, slow" every few seconds.

Incremental: O(1) amortized per GPU per sample (deques with running counts), pure (the same
snapshots give the same answers), so replay and live agree.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from gputui.collect.model import GpuSample, Snapshot
from gputui.diagnose.job_groups import Group
from gputui.diagnose.slow.busy_windows import GpuHistory

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
REL_POWER_GAP = 0.15  # of the limit: a rank this far below its job's busiest GPU waits
REL_MEM_GAP = 5.0  # ...with this many points less memory traffic (a 1.25x imbalance: 4)
HOLD_S = 8.0  # a named straggler set holds while the rule fails for up to this long
SWITCH_S = 6.0  # another set replaces it once named this long without a break
SPIN_BREAKS_HOLD_S = 2.0  # a GPU of the job spinning this long ends the hold (see judge)

WAIT, BUSY = True, False
K = TypeVar("K")  # a GPU index here; "host:gpu" across nodes


Ref = tuple[float | None, float | None]  # the job's busiest power fraction and mem_util


def is_waiting(g: GpuSample, ref: Ref | None = None) -> bool | None:
    """True: this sample shows a rank waiting in a collective; False: busy otherwise; None:
    no kernel (idle, free) or the readings needed to tell are missing.

    Waiting is either the collective-wait pattern itself (a resident kernel that moves little
    memory and draws little power) or, given `ref` (the busiest readings of the GPU's job at
    this sample), a resident kernel clearly lighter than its busiest peer's."""
    util, mem = g.util, g.mem_util
    if util is None or util < BUSY_UTIL_MIN or not g.pids:
        return None
    frac = g.power_frac  # a property: read once (this runs for every GPU of every sample)
    if mem is None and frac is None:
        return None
    if util < WAIT_UTIL_MIN:
        return BUSY
    if _pattern(mem, frac) or (ref is not None and _lighter(frac, mem, ref)):
        return WAIT
    return BUSY


def _pattern(mem: float | None, frac: float | None) -> bool:
    """The absolute wait levels: little memory traffic and little power for its limit."""
    if mem is not None and mem > WAIT_MEM_UTIL_MAX:
        return False
    return frac is None or frac <= WAIT_POWER_FRAC_MAX


def _lighter(frac: float | None, mem: float | None, ref: Ref) -> bool:
    """A GPU reading `frac` (power fraction) and `mem` (mem_util) is clearly below its job's
    busiest GPU at the same sample: less power (when both read it) and less memory traffic
    (when both read it); at least one of the two is compared."""
    top_frac, top_mem = ref
    compared = False
    if frac is not None and top_frac is not None:
        if frac > top_frac - REL_POWER_GAP:
            return False
        compared = True
    if mem is not None and top_mem is not None:
        if mem > top_mem - REL_MEM_GAP:
            return False
        compared = True
    return compared


def _refs(snap: Snapshot, groups: Iterable[Group]) -> dict[int, Ref]:
    """GPU -> the busiest readings of its job at this sample, for jobs of two GPUs or more
    with a kernel on them: the peers each rank is measured against (a lone process has no
    peer to measure against, as in judge)."""
    return peers_ref(snap.gpus, [g.present(snap) for g in groups if len(g.members) >= 2])


def peers_ref(gpus: Sequence[GpuSample], peers: Sequence[Sequence[int]]) -> dict[int, Ref]:
    """GPU -> the busiest readings of its group at this sample, each group given by its GPUs
    present now (a later group wins): _refs for the detector's groups, and the quiet step's
    code for a sample read from columns (gputui.diagnose.quiet_code)."""
    out: dict[int, Ref] = {}
    by_index = {g.index: g for g in gpus}
    for present in peers:
        busy = [
            g
            for i in present
            if (g := by_index.get(i)) is not None and (g.util or 0.0) >= BUSY_UTIL_MIN and g.pids
        ]
        if len(busy) < 2:
            continue
        fracs = [f for g in busy if (f := g.power_frac) is not None]
        mems = [m for g in busy if (m := g.mem_util) is not None]
        ref = (max(fracs, default=None), max(mems, default=None))
        for g in busy:
            out[g.index] = ref
    return out


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


@dataclass
class _Hold:
    """The stragglers a job was last named with, and a different set the rule names now."""

    stragglers: tuple[int, ...]
    waiters: tuple[int, ...]
    last: float  # the last sample at which the rule named exactly these
    said: Straggle  # the last Straggle that named them (what is shown while they hold)
    other: tuple[int, ...] = ()
    other_since: float = 0.0


class WaitShares:
    """Feed it every snapshot with the detector's groups (`observe`, then `judge`); it returns
    each job's Straggle."""

    def __init__(self) -> None:
        self.gpus: dict[int, GpuHistory] = {}
        self.waiting: set[int] = set()  # GPUs counted as waiting at the last judge()
        self._held: dict[str, _Hold] = {}
        # job key -> (what _judge read, what it said): see _judge
        self._memo: dict[str, tuple[tuple[object, ...], Straggle]] = {}

    def observe(self, snap: Snapshot, groups: Iterable[Group] = ()) -> None:
        """Account this sample's GPUs, each against the busiest GPU of its job in `groups`
        (without groups, by the wait levels alone): O(1) amortized per GPU."""
        refs = _refs(snap, groups)
        t, hists = snap.t, self.gpus
        seen = set()
        for g in snap.gpus:
            i, pids = g.index, g.pids
            seen.add(i)
            h = hists.get(i)
            if h is None:
                h = hists[i] = GpuHistory(pids, t, WINDOW_S, RECENT_S)
            elif pids and not h.same_pids(pids):  # the same pids: h.pids holds them already
                if h.pids.isdisjoint(pids):
                    h = hists[i] = GpuHistory(pids, t, WINDOW_S, RECENT_S)  # a new job
                else:
                    h.set_pids(pids)
            h.note(t, is_waiting(g, refs.get(i)))
        if len(hists) > len(seen):  # a GPU no longer reported
            for i in set(hists) - seen:
                del hists[i]

    def settled(self) -> bool:
        """No GPU counted as waiting, no straggler held, and no wait in any GPU's windows:
        every share is 0 whatever the windows' times, so a sample adding no wait judges
        nothing new (a replay's quiet step)."""
        if self._held or self.waiting:
            return False
        return all(h.window.waits == 0 and h.recent.waits == 0 for h in self.gpus.values())

    def judge(
        self, snap: Snapshot, groups: Iterable[Group], spinning: Collection[int] = ()
    ) -> list[Straggle]:
        """The Straggle of every job with two or more GPUs here and enough history.

        `spinning`: GPUs the hang detector sees spinning without a break (its runs). A job
        with one is neither held slow nor said to "wait alike": its stall may be starting, and
        a slow line must not stand in for the onset of a hang."""
        out = []
        waiting: set[int] = set()
        judged: set[str] = set()
        for group in groups:
            if len(group.members) < 2:
                continue  # a lone process (most of a crowded node): nothing to compare
            present = group.present(snap)
            if len(present) < 2:
                continue
            judged.add(group.key)
            s = self._judge(group, present, snap.t)
            if spinning and not set(spinning).isdisjoint(present):
                self._held.pop(group.key, None)
                if s is not None and s.alike:  # alike, or the onset of a hang: not said
                    s = Straggle(**{**s.__dict__, "alike": False})
            else:
                s = self._damp(group.key, s, snap.t, present)
            if s is not None:
                # Hysteresis: a GPU starts to count as waiting at WAITER_SHARE_MIN and stops
                # below WAITING_LEAVE, so a share near the line does not flap.
                now = tuple(
                    [
                        i
                        for i, x in sorted(s.shares.items())
                        if x >= WAITER_SHARE_MIN or (i in self.waiting and x >= WAITING_LEAVE)
                    ]
                )
                waiting.update(now)
                # A copy only when it says more: the Straggle itself where it already has
                # these GPUs waiting (a frozen value; its copy would be equal).
                out.append(s if s.waiting == now else Straggle(**{**s.__dict__, "waiting": now}))
        self.waiting = waiting
        for key in set(self._held) - judged:  # the job ended or left this node's GPUs
            del self._held[key]
        for key in [k for k in self._memo if k not in judged]:
            del self._memo[key]
        return out

    def _damp(
        self, key: str, s: Straggle | None, now: float, present: tuple[int, ...]
    ) -> Straggle | None:
        """One steady answer per cause: the named set holds through HOLD_S of silence, and a
        different set takes over only once named for SWITCH_S without a break.

        A hold ends at once when a GPU it names has no process of the job now (`present`):
        its rank died, and the hold would name a rank the job no longer has, even while the
        rule says nothing (a new rank with no full window yet)."""
        h = self._held.get(key)
        named = s.stragglers if s is not None else ()
        if h is not None and (
            now - h.last >= HOLD_S or not {*h.stragglers, *h.waiters}.issubset(present)
        ):
            del self._held[key]
            h = None
        if named and (h is None or named == h.stragglers):
            assert s is not None
            self._held[key] = _Hold(named, s.waiters, now, s)
            return s
        if h is None:
            return s
        if named:
            if named != h.other:
                h.other, h.other_since = named, now
            if now - h.other_since >= SWITCH_S:
                assert s is not None
                self._held[key] = _Hold(named, s.waiters, now, s)
                return s
        else:
            h.other = ()
        base = s if s is not None else h.said
        return Straggle(**{**base.__dict__, "stragglers": h.stragglers, "waiters": h.waiters})

    def _judge(self, group: Group, present: tuple[int, ...], now: float) -> Straggle | None:
        hist = {i: h for i in present if (h := self.gpus.get(i)) is not None}
        full: set[int] = set()
        sparse: set[int] = set()
        spans: dict[int, float] = {}
        shares: dict[int, float] = {}  # GPU -> its wait share over the window (0 if none)
        recent: dict[int, float] = {}  # ...and over the recent part
        for i, h in hist.items():
            window, last = h.window.items, h.recent.items
            spans[i] = span = window[-1][0] - window[0][0] if window else 0.0
            shares[i], recent[i] = h.shares()
            if span >= MIN_SPAN_S and len(window) >= MIN_SAMPLES and len(last) >= MIN_RECENT:
                full.add(i)
            # A rank busy on its host CPU (its data loader, a CPU-bound step) launches few
            # kernels: here for MIN_SPAN_S with a kernel in the last RECENT_S, it may still be
            # the straggler, judged by its few busy samples. A rank with no kernel lately is
            # not progressing: that is the hang detector's case, and nothing is said here.
            elif (
                now - h.since >= MIN_SPAN_S
                and last
                and _bursts(window) >= 2  # it came back from idle: it runs in steps
            ):
                sparse.add(i)
        if not full or len(full) + len(sparse) < len(present):
            return None
        # Every GPU judged on a full window (so `hist` covers `present`): the answer is a pure
        # function of what is read below, which stays the same for long stretches (a job
        # whose shares hold still), so the last answer is given again when it is the same.
        read = None
        if not sparse:
            pids = tuple([group.members[i].pids for i in present])
            ranks = tuple(group.ranks.values())
            read = (present, *spans.values(), *shares.values(), *recent.values(), ranks, pids)
            read += (group.label,)
            memo = self._memo.get(group.key)
            if memo is not None and memo[0] == read:
                return memo[1]
        low, high, alike = split(shares, recent)
        if not sparse <= set(low):
            return None  # too few samples to say anything but "it holds the others back"
        # split names stragglers, or says alike, or neither (all three empty or False).
        said = Straggle(
            group.key,
            group.label,
            shares,
            stragglers=low,
            waiters=high,
            alike=alike,
            window_s=max(spans[i] for i in full),
            ranks={gpu: r for r, gpu in group.ranks.values() if r is not None and gpu in shares},
            pids={i: group.members[i].pids for i in present},
        )
        if read is not None:
            self._memo[group.key] = (read, said)
        return said


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
    low = tuple([k for k in keys if max(shares[k], recent[k]) <= STRAGGLER_SHARE_MAX])
    high = tuple([k for k in keys if min(shares[k], recent[k]) >= WAITER_SHARE_MIN])
    if low and high and len(low) <= len(high):
        if min(shares[k] for k in high) - max(shares[k] for k in low) >= GAP_MIN:
            return low, high, False
    alike = bool(keys) and len(high) == len(keys)
    alike = alike and max(shares.values()) - min(shares.values()) <= ALIKE_SPREAD_MAX
    return (), (), alike


def straggles_over(snaps: Iterable[Snapshot]) -> list[Straggle]:
    """Each job's Straggle at the last of `snaps` (a replay's `snapshot --at`): the same
    bookkeeping as the detector's, judged at every sample so that a held answer is too."""
    from gputui.diagnose.job_groups import GroupMemory

    memory, shares = GroupMemory(), WaitShares()
    out: list[Straggle] = []
    for s in snaps:
        groups = memory.update(s)
        shares.observe(s, groups)
        out = shares.judge(s, groups)
    return out
