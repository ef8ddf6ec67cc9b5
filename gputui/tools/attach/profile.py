"""A few seconds of py-spy sampling of one rank, folded into its top functions, in wall time.

Why: a straggler's GPU readings say *that* it holds the job back and hint at why (power,
clocks, host CPU); where its time goes inside the process is a question for a sampling
profiler. `py-spy record --format raw` (collapsed stacks, one line per distinct stack with
its count) for PROFILE_SECONDS at PROFILE_RATE, without pausing the target
(`--nonblocking`: a slow job must not be slowed further), bounded like every attach
(gputui.tools.attach.stacks.attach_run: identity check, time limit, process group killed on
timeout). The output file is read up to MAX_OUTPUT_BYTES.

Shares are of *wall time*: a rank held back by its input pipeline spends most of each step
asleep or blocked on a read, and py-spy leaves idle samples out by default (on 4 x H200 a
rank sleeping 40 ms a step read "synchronize 80 %, the input function 20 %" from 10 samples
in 3 s, while it spent about 90 % of its wall time in the input function). So two samplers
run side by side over the same seconds: one with `--idle` (every sample: wall time) and one
without (the samples where Python ran); a frame's idle share is the difference. Meanwhile
the main thread's kernel state and wait channel (/proc/PID/task/PID/stat and wchan) are read
at the same rate, so an idle share is said as what it is: sleeping, blocked on a read, on a
lock, or in the kernel.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gputui.redact import redact_text
from gputui.textsafe import clean
from gputui.tools.attach.ptrace import Target
from gputui.tools.attach.stacks import TargetLike, attach_run, tool_missing
from gputui.tools.result import Cancel, Outcome, ToolResult
from gputui.tools.which import find_tool, missing_message

PROFILE_SECONDS = 3.0
PROFILE_RATE = 50  # samples a second: 150 samples over 3 s, enough to rank the top few
TOP_N = 8
MAX_OUTPUT_BYTES = 4 << 20  # collapsed stacks of a few seconds are kilobytes
MAX_FRAME_CHARS = 200
EXTRA_TIMEOUT_S = 10.0  # py-spy's start and the write of its file, on top of the sampling
IDLE_FRAME = 0.5  # a frame idle in at least this share of its samples is said as idle

_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")

# What a thread blocked in the kernel waits for, by its wait channel (/proc/PID/wchan).
_WAITS = (
    (re.compile(r"nanosleep|hrtimer|schedule_timeout|clock_nanosleep"), "sleeping"),
    (re.compile(r"futex"), "waiting on a lock or another thread"),
    (
        re.compile(r"pipe_read|read|recv|sk_wait|tcp|unix_stream|poll|select|epoll|wait_woken"),
        "blocked on a read (a socket, a pipe or a file)",
    ),
)
DISK_WAIT = "in the kernel (disk or file system I/O)"


@dataclass(frozen=True)
class Row:
    """One frame: its share of the wall-time samples, and how much of that was idle."""

    frame: str
    share: float
    idle: float = 0.0  # share of the wall-time samples in which this frame was idle

    def to_json(self) -> dict[str, Any]:
        return {"frame": self.frame, "share": round(self.share, 3), "idle": round(self.idle, 3)}


@dataclass(frozen=True)
class Profile:
    """Where one process spent the sampled seconds: frames by share of wall time."""

    pid: int
    result: ToolResult
    samples: int = 0
    top_self: tuple[Row, ...] = ()  # innermost frame -> share of the samples
    top_total: tuple[Row, ...] = ()  # any frame on the stack -> share
    seconds: float = PROFILE_SECONDS
    extra: dict[str, Any] = field(default_factory=dict)
    idle_share: float | None = None  # of all samples; None: only running samples were taken
    idle_kind: str | None = None  # what the idle samples waited on ("sleeping", ...)

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "outcome": self.result.outcome.value,
            "message": self.result.message,
            "seconds": self.seconds,
            "samples": self.samples,
            "basis": "running" if self.idle_share is None else "wall",
            "idle_share": None if self.idle_share is None else round(self.idle_share, 3),
            "idle_kind": self.idle_kind,
            "top_self": [r.to_json() for r in self.top_self],
            "top_total": [r.to_json() for r in self.top_total],
            "where": self.sentence(),
            **self.extra,
        }

    def sentence(self) -> str | None:
        """The top frame said plainly: "load_batch (train.py:88): 88 % of wall time,
        sleeping" (None without samples)."""
        return row_sentence(self.top_self[0], self.idle_kind) if self.top_self else None

    def lines(self) -> list[str]:
        """The profile as a person reads it: the innermost frames first."""
        if not self.result.ok:
            return [self.result.summary()]
        basis = "wall time" if self.idle_share is not None else "running samples only"
        head = f"py-spy pid {self.pid}: {self.samples} samples over {self.seconds:g} s ({basis}"
        if self.idle_share is not None:
            kind = f": {self.idle_kind}" if self.idle_kind and self.idle_share >= 0.05 else ""
            head += f"; {self.idle_share:.0%} idle{kind}"
        return [head + ")"] + [row_line(r, self.idle_kind) for r in self.top_self]


def row_sentence(r: Row, kind: str | None) -> str:
    """ "load_batch (train.py:88): 88 % of wall time, sleeping"."""
    return f"{r.frame}: {r.share:.0%} of wall time, {_state(r, kind)}"


def row_line(r: Row, kind: str | None) -> str:
    return f"{r.share:5.0%}  {r.frame}  ({_state(r, kind)})"


def _state(r: Row, kind: str | None) -> str:
    if r.share <= 0 or r.idle / r.share < IDLE_FRAME:
        return "running"
    return kind or "idle"


def fold(
    text: str, top: int = TOP_N
) -> tuple[int, list[tuple[str, float]], list[tuple[str, float]]]:
    """Collapsed stacks -> (samples, top innermost frames, top frames anywhere on a stack).

    Lines that are not `frame;frame;... COUNT` are skipped: the file is the tool's output."""
    n, own, total = _counts(text)
    if n == 0:
        return 0, [], []
    return (
        n,
        [(f, c / n) for f, c in own.most_common(top)],
        [(f, c / n) for f, c in total.most_common(top)],
    )


def _counts(text: str) -> tuple[int, Counter[str], Counter[str]]:
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    n = 0
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m is None:
            continue
        count = int(m["count"])
        frames = [clean(f)[:MAX_FRAME_CHARS] for f in m["stack"].split(";") if f]
        if not frames or count <= 0:
            continue
        n += count
        own[frames[-1]] += count
        for f in set(frames):
            total[f] += count
    return n, own, total


def fold_wall(
    wall_text: str, running_text: str, top: int = TOP_N
) -> tuple[int, float, list[Row], list[Row]]:
    """Two samplers over the same seconds, one with idle samples and one without ->
    (wall samples, idle share, top innermost frames, top frames anywhere), each frame with
    the share of wall time it was idle in (its wall count less its running count)."""
    n, own, total = _counts(wall_text)
    m, own_run, total_run = _counts(running_text)
    if n == 0:
        return 0, 0.0, [], []
    m = min(m, n)  # the two samplers start a few milliseconds apart

    def rows(c: Counter[str], run: Counter[str]) -> list[Row]:
        return [Row(f, k / n, max(0, k - run.get(f, 0)) / n) for f, k in c.most_common(top)]

    return n, (n - m) / n, rows(own, own_run), rows(total, total_run)


def idle_kind(states: list[tuple[str, str]]) -> str | None:
    """The commonest wait of the samples in which the thread was not running: (state
    letter, wait channel) pairs read from /proc."""
    kinds: Counter[str] = Counter()
    for state, wchan in states:
        if state == "R":
            continue
        if state == "D":
            kinds[DISK_WAIT] += 1
            continue
        word = next((w for rx, w in _WAITS if rx.search(wchan)), None)
        kinds[word or "idle"] += 1
    return kinds.most_common(1)[0][0] if kinds else None


def read_wait(pid: int) -> tuple[str, str] | None:
    """The main thread's (state letter, wait channel), or None when it is gone."""
    base = f"/proc/{pid}/task/{pid}"
    try:
        with open(f"{base}/stat", "rb") as f:
            stat = f.read(4096).decode("ascii", "replace")
        state = stat.rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
    try:
        with open(f"{base}/wchan", "rb") as f:
            wchan = f.read(128).decode("ascii", "replace")
    except OSError:
        wchan = ""
    return state, wchan


def profile_rank(
    target: TargetLike,
    *,
    seconds: float = PROFILE_SECONDS,
    rate: int = PROFILE_RATE,
    top: int = TOP_N,
    cancel: Cancel | None = None,
    tool_path: str | None = None,
) -> Profile:
    """`py-spy record` of `target` for `seconds`, in wall time; never raises for the
    target's sake."""
    pid = Target.of(target).pid
    exe = find_tool("py-spy", tool_path)
    if exe is None:
        return Profile(
            pid, tool_missing("py-spy record", target, missing_message("py-spy", tool_path))
        )
    with tempfile.TemporaryDirectory(prefix="gputui-profile-") as tmp:
        outs = {kind: os.path.join(tmp, f"{kind}.txt") for kind in ("wall", "running")}
        results: dict[str, ToolResult] = {}

        def record(kind: str) -> None:
            args = [
                "record", "--pid", str(pid), "--duration", f"{seconds:g}", "--rate", str(rate),
                "--format", "raw", "--output", outs[kind], "--nonblocking",
                *(["--idle"] if kind == "wall" else []),
            ]  # fmt: skip
            results[kind] = attach_run(
                "py-spy record", exe, args, target, timeout=seconds + EXTRA_TIMEOUT_S, cancel=cancel
            )

        running = threading.Thread(target=record, args=("running",), name="gputui-profile-run")
        running.start()
        states: list[tuple[str, str]] = []
        watch = threading.Thread(
            target=_watch_waits, args=(pid, rate, running, states, cancel), daemon=True
        )
        watch.start()
        record("wall")
        running.join(seconds + EXTRA_TIMEOUT_S + 5.0)
        watch.join(1.0)
        texts = {kind: _read(path) for kind, path in outs.items()}
    res = results["wall"]
    if res.ok and "running" in results and results["running"].ok:
        n, idle, own, total = fold_wall(redact_text(texts["wall"]), redact_text(texts["running"]))
        kind = idle_kind(list(states))
    else:  # one sampler alone: its samples, as they are
        n, own_t, total_t = fold(redact_text(texts["wall"]), top)
        own = [Row(f, x) for f, x in own_t]
        total = [Row(f, x) for f, x in total_t]
        idle, kind = None, None
    if res.ok and n == 0:
        res = ToolResult(res.tool, pid, Outcome.FAILED, "no Python samples", res.lines)
    return Profile(pid, res, n, tuple(own[:top]), tuple(total[:top]), seconds, {}, idle, kind)


def _watch_waits(
    pid: int,
    rate: int,
    sampler: threading.Thread,
    out: list[tuple[str, str]],
    cancel: Cancel | None,
) -> None:
    """Read the main thread's state and wait channel at the samplers' rate while they run."""
    stop = threading.Event()
    while sampler.is_alive() and not (cancel is not None and cancel.is_set()):
        w = read_wait(pid)
        if w is None:
            return
        out.append(w)
        stop.wait(1.0 / max(1, rate))


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


class StragglerProfiler:
    """Profiles the straggler of a slow verdict once per set of stragglers, off the caller's
    thread (`gputui check --profile-straggler`); `poll` hands back the finished profile."""

    def __init__(self, seconds: float = PROFILE_SECONDS) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.seconds = seconds
        self.cancel = Cancel()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gputui-profile")
        self._for: tuple[int, ...] | None = None
        self._future: Any = None
        self._where: dict[str, Any] = {}

    def poll(self, v: Any, snap: Any) -> dict[str, Any] | None:
        """The profile of `v`'s straggler once it is done (None before, or if not slow).
        Starts one when the stragglers change; only live processes are profiled."""
        stragglers = tuple(getattr(v, "stragglers", ()))
        if not stragglers:
            return None
        if stragglers != self._for:
            self._for, self._future = stragglers, None
            pids = (getattr(v, "slow_why", {}) or {}).get("pids") or []
            proc = next((p for pid in pids if (p := snap.process(pid)) and p.live), None)
            if proc is None:
                return None
            gpu = next(iter(stragglers))
            rank = proc.rank.rank if proc.rank is not None else None
            self._where = {"gpu": gpu, "rank": rank}
            self._future = self._pool.submit(
                profile_rank, proc, seconds=self.seconds, cancel=self.cancel
            )
        if self._future is None or not self._future.done():
            return None
        try:
            prof = self._future.result().to_json()
        except Exception as e:  # a profile that breaks must end as data, not kill the check
            prof = {"outcome": "failed", "message": f"{type(e).__name__}: {e}"[:200]}
        return {**self._where, **prof}

    def pending(self) -> bool:
        return self._future is not None and not self._future.done()

    def wait(self, timeout: float) -> None:
        from concurrent.futures import wait

        if self._future is not None:
            wait([self._future], timeout=timeout)

    def close(self) -> None:
        self.cancel.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
