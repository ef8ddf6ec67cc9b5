"""A few seconds of py-spy sampling of one rank, folded into its top functions.

Why: a straggler's GPU readings say *that* it holds the job back and hint at why (power,
clocks, host CPU); where its time goes inside the process is a question for a sampling
profiler. `py-spy record --format raw` (collapsed stacks, one line per distinct stack with
its count) for PROFILE_SECONDS at PROFILE_RATE, without pausing the target
(`--nonblocking`: a slow job must not be slowed further), bounded like every attach
(gputui.tools.stacks.attach_run: identity check, time limit, process group killed on
timeout). The output file is read up to MAX_OUTPUT_BYTES. Idle threads are left out by
py-spy, so the shares are of the samples where the process was running Python.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gputui.redact import redact_text
from gputui.textsafe import clean
from gputui.tools.ptrace import Target
from gputui.tools.result import Cancel, Outcome, ToolResult
from gputui.tools.stacks import TargetLike, _missing, attach_run
from gputui.tools.which import find_tool, missing_message

PROFILE_SECONDS = 3.0
PROFILE_RATE = 50  # samples a second: 150 samples over 3 s, enough to rank the top few
TOP_N = 8
MAX_OUTPUT_BYTES = 4 << 20  # collapsed stacks of a few seconds are kilobytes
MAX_FRAME_CHARS = 200
EXTRA_TIMEOUT_S = 10.0  # py-spy's start and the write of its file, on top of the sampling

_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")


@dataclass(frozen=True)
class Profile:
    """Where one process spent the sampled seconds: frames by share of the samples."""

    pid: int
    result: ToolResult
    samples: int = 0
    top_self: tuple[tuple[str, float], ...] = ()  # innermost frame -> share of samples
    top_total: tuple[tuple[str, float], ...] = ()  # any frame on the stack -> share
    seconds: float = PROFILE_SECONDS
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "outcome": self.result.outcome.value,
            "message": self.result.message,
            "seconds": self.seconds,
            "samples": self.samples,
            "top_self": [{"frame": f, "share": round(s, 3)} for f, s in self.top_self],
            "top_total": [{"frame": f, "share": round(s, 3)} for f, s in self.top_total],
            **self.extra,
        }

    def lines(self) -> list[str]:
        """The profile as a person reads it: the innermost frames first."""
        if not self.result.ok:
            return [self.result.summary()]
        head = f"py-spy pid {self.pid}: {self.samples} samples over {self.seconds:g} s"
        return [head] + [f"{s:5.0%}  {f}" for f, s in self.top_self]


def fold(
    text: str, top: int = TOP_N
) -> tuple[int, list[tuple[str, float]], list[tuple[str, float]]]:
    """Collapsed stacks -> (samples, top innermost frames, top frames anywhere on a stack).

    Lines that are not `frame;frame;... COUNT` are skipped: the file is the tool's output."""
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
    if n == 0:
        return 0, [], []
    return (
        n,
        [(f, c / n) for f, c in own.most_common(top)],
        [(f, c / n) for f, c in total.most_common(top)],
    )


def profile(
    target: TargetLike,
    *,
    seconds: float = PROFILE_SECONDS,
    rate: int = PROFILE_RATE,
    top: int = TOP_N,
    cancel: Cancel | None = None,
    tool_path: str | None = None,
) -> Profile:
    """`py-spy record` of `target` for `seconds`; never raises for the target's sake."""
    pid = Target.of(target).pid
    exe = find_tool("py-spy", tool_path)
    if exe is None:
        return Profile(pid, _missing("py-spy record", target, missing_message("py-spy", tool_path)))
    with tempfile.TemporaryDirectory(prefix="gputui-profile-") as tmp:
        out = os.path.join(tmp, "stacks.txt")
        args = [
            "record", "--pid", str(pid), "--duration", f"{seconds:g}", "--rate", str(rate),
            "--format", "raw", "--output", out, "--nonblocking",
        ]  # fmt: skip
        res = attach_run(
            "py-spy record", exe, args, target, timeout=seconds + EXTRA_TIMEOUT_S, cancel=cancel
        )
        text = ""
        try:
            with open(out, "rb") as f:
                text = f.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace")
        except OSError:
            pass
    n, own, total = fold(redact_text(text), top)
    if res.ok and n == 0:
        res = ToolResult(
            res.tool, pid, Outcome.FAILED, "no Python samples (the process was idle)", res.lines
        )
    return Profile(pid, res, n, tuple(own), tuple(total), seconds)


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
                profile, proc, seconds=self.seconds, cancel=self.cancel
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
