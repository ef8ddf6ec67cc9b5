"""Figure 18: does a sampling loop keep its interval? 1,000 ticks at 0.5 s, a real sample each.

Each tick takes one real sample: gputui's live source (`LiveSource.sample()`: NVML where
there is a driver, and every host process read through psutil), or with `--source demo` the
bundled recording played as fast as it reads. The loop under test paces the ticks:

- `ticker`: gputui.collect.pacing.Ticker, the one pacing loop of the dashboard's sampler,
  `check`, `bundle` and `record` (tick k due at start + k * interval);
- `sleep`: the loop `check` had before it, `sample(); time.sleep(source.next_delay())`,
  which adds each sample's time (and each wake-up's lateness) to every period.

Drift is the last tick's lateness (when it started, against start + k * interval, k its slot
on the grid: its index plus the ticks skipped before it) over the run's nominal length. The
per-tick lateness percentiles say how far any one tick strays; `skipped` counts the ticks a
sample overran (none, unless the box stalls the loop).

    nice python bench/pacing_drift.py --loop ticker --json /tmp/pacing_ticker.json
    nice python bench/pacing_drift.py --loop sleep --ticks 1000
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from common import machine, machine_line, median, pct, table, write_json

from gputui.collect.pacing import Ticker


def make_sample(which: str, interval: float) -> tuple[Callable[[], object], Callable[[], None]]:
    """A function taking one real sample, and one that closes its source."""
    if which == "demo":
        from gputui.collect.source import ReplaySource

        src = ReplaySource.demo(realtime=False)

        def demo_sample() -> object:
            snap = src.sample()
            if snap is None:  # played through: again from the start
                src.pos = 0
                snap = src.sample()
            return snap

        return demo_sample, src.close
    from gputui.collect.live import LiveSource

    live = LiveSource(interval=interval)
    return live.sample, live.close


def run_loop(
    loop: str, ticks: int, interval: float, sample: Callable[[], object]
) -> dict[str, Any]:
    """Run `ticks` ticks of one loop; returns when each tick started and what samples took."""
    starts: list[float] = []
    slots: list[int] = []  # the grid slot of each tick: its index, plus the ticks skipped
    costs: list[float] = []
    skipped = 0
    t0 = time.monotonic()
    if loop == "ticker":
        ticker = Ticker(interval)
        while len(starts) < ticks and ticker.wait():
            now = time.monotonic()
            slots.append(len(starts) + ticker.skipped)
            starts.append(now)
            sample()
            costs.append(time.monotonic() - now)
        skipped = ticker.skipped
    else:  # the old check loop, as it was: sample, then sleep the whole interval
        while len(starts) < ticks:
            now = time.monotonic()
            slots.append(len(starts))
            starts.append(now)
            sample()
            costs.append(time.monotonic() - now)
            if len(starts) < ticks:
                time.sleep(interval)
    late = [s - (starts[0] + k * interval) for k, s in zip(slots, starts, strict=True)]
    nominal = slots[-1] * interval
    return {
        "loop": loop,
        "ticks": ticks,
        "interval_s": interval,
        "wall_s": time.monotonic() - t0,
        "last_late_s": late[-1],
        "drift_pct": 100.0 * late[-1] / nominal if nominal else 0.0,
        "late_p50_ms": 1e3 * median(late),
        "late_p99_ms": 1e3 * pct(late, 99),
        "late_max_ms": 1e3 * max(late),
        "sample_p50_ms": 1e3 * median(costs),
        "sample_p99_ms": 1e3 * pct(costs, 99),
        "skipped": skipped,
    }


def report(rows: list[dict[str, Any]]) -> str:
    head = (
        "loop", "ticks", "interval s", "wall s", "last tick late s", "drift %",
        "late p50 ms", "late p99 ms", "sample p50 ms", "skipped",
    )  # fmt: skip
    keys = (
        "loop", "ticks", "interval_s", "wall_s", "last_late_s",
        "drift_pct", "late_p50_ms", "late_p99_ms", "sample_p50_ms", "skipped",
    )  # fmt: skip
    body = [tuple(r[k] for k in keys) for r in rows]
    return table(body, head)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--loop", choices=("ticker", "sleep"), nargs="+", default=["ticker"])
    ap.add_argument("--ticks", type=int, default=1000, help="ticks of each loop (default 1000)")
    ap.add_argument("--interval", type=float, default=0.5, help="seconds (default 0.5)")
    ap.add_argument("--source", choices=("live", "demo"), default="live")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    print(machine_line(machine()), file=sys.stderr)
    sample, close = make_sample(args.source, args.interval)
    try:
        rows = [run_loop(lp, args.ticks, args.interval, sample) for lp in args.loop]
    finally:
        close()
    for r in rows:
        r["source"] = args.source
    print(report(rows))
    write_json(args.json, "pacing_drift", {"runs": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
