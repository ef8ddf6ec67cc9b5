"""Which sample a GPU line belongs to: the one set of rules for grouping a recording's lines.

Why a module of its own: the full reader (gputui.collect.trace.read) and the index pass of
`snapshot --replay` (gputui.collect.trace.window, which groups lines without parsing them)
must group the same file into the same samples and refuse it with the same words; when
each had its own copy, their messages drifted apart. The rules (read's docstring says why):

- consecutive lines with times within SAME_SAMPLE_S of the sample's first line and distinct
  GPU indices form one sample; a repeated GPU index or a larger gap starts the next;
- a sample whose time is not after the previous sample's is an error (time order);
- an exact repeat of a line of this or the previous sample (same `t`, `gpu` and bytes) is
  dropped; a *different* line with the same `t` and `gpu` is an error naming both lines;
- at most MAX_SAMPLES samples per file and MAX_GPUS_PER_SAMPLE lines per sample.

Errors name the line as `FILE:LINE`, built only when one is raised: a day-long recording
has 200,000 lines and none of them needs its name otherwise.
"""

from __future__ import annotations

from collections.abc import Callable

from gputui.collect.trace import schema
from gputui.errors import GputuiError

SAME_SAMPLE_S = 0.2
"""Lines of one sample share a time; a gap larger than this starts a new sample even when
the GPU index does not repeat (a file with one GPU). The recorder writes one time per
sample; the calibration recorder's lines of one sample are a few milliseconds apart."""

REPEAT, JOINED, OPENED = 0, 1, 2  # what Grouping.place did with a line


class Grouping:
    """The samples of one file as its GPU lines arrive, in file order, one pass."""

    def __init__(self, name: str) -> None:
        self.name = name  # the file, as error messages show it
        self.t0: float | None = None  # the open sample's time (its first line's)
        self.gpus: set[int] = set()  # the open sample's GPU indices
        self.opened = 0  # samples opened so far
        self.floor: float | None = None  # the time of a sample without GPU lines (`bare`)
        # (t, gpu) -> (bytes, line) of the open and the previous sample's lines: the line
        # itself is kept (two samples' worth) to tell a repeat from a different reading
        self.recent: dict[tuple[float, int], tuple[bytes, int]] = {}
        self.older: dict[tuple[float, int], tuple[bytes, int]] = {}

    def where(self, n: int) -> str:
        return f"{self.name}:{n}"

    def repeat(self, t: float, gpu: int, raw: bytes, n: int) -> bool:
        """True for an exact repeat of a line of this or the last sample (to be dropped);
        an error for a different line with the same `t` and `gpu`."""
        seen = self.recent.get((t, gpu)) or self.older.get((t, gpu))
        if seen is None:
            return False
        if seen[0] == raw:
            return True
        raise GputuiError(
            f"{self.where(n)}: a second, different reading of GPU {gpu} at t={t:.3f} "
            f"(the first is on line {seen[1]})"
        )

    def place(self, t: float, gpu: int, raw: bytes, n: int, close: Callable[[], None]) -> int:
        """REPEAT for an exact repeat (see `repeat`: drop it); else the line goes into the
        open sample (JOINED) or opens the next one (OPENED). `close()` is called before the
        next sample opens, so the caller finishes the previous sample before this line's
        errors can be raised. One call per line: a day-long recording has 200,000."""
        if self.repeat(t, gpu, raw, n):
            return REPEAT
        t0 = self.t0
        if t0 is None or gpu in self.gpus or abs(t - t0) > SAME_SAMPLE_S:
            if t0 is not None:
                close()
            self._open(t, gpu, n)
            got = OPENED
        else:
            if len(self.gpus) >= schema.MAX_GPUS_PER_SAMPLE:
                raise GputuiError(
                    f"{self.where(n)}: more than {schema.MAX_GPUS_PER_SAMPLE} GPUs in one sample"
                )
            self.gpus.add(gpu)
            got = JOINED
        self.recent[(t, gpu)] = (raw, n)
        return got

    def bare(self, t: float, n: int) -> None:
        """A sample without GPU lines at `t` (a `nogpu` record: a machine with no GPU), its
        open sample already closed by the caller: time order holds across it, and the next
        GPU line opens a sample of its own."""
        self._order(t, n)
        self.older, self.recent = self.recent, {}
        self.t0, self.floor, self.gpus = None, t, set()
        self.opened += 1

    def _order(self, t: float, n: int) -> None:
        prev = self.t0 if self.t0 is not None else self.floor
        if prev is not None and t <= prev:
            how = "goes backwards" if t < prev else "does not advance"
            raise GputuiError(
                f"{self.where(n)}: time {how} (t={t:.3f} after a sample at t={prev:.3f}); "
                "samples must be in time order"
            )
        if self.opened >= schema.MAX_SAMPLES:
            raise GputuiError(
                f"{self.where(n)}: more than {schema.MAX_SAMPLES} samples in one file"
            )

    def _open(self, t: float, gpu: int, n: int) -> None:
        self._order(t, n)
        self.older, self.recent = self.recent, {}
        self.t0 = t
        self.gpus = {gpu}
        self.opened += 1
