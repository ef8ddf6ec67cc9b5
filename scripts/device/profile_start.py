"""Where the dashboard's start-up time goes on a GPU node: the live source's start, its first
samples and the Watcher's first updates, under cProfile (CPU and wall), top entries printed.
    python3 scripts/device/profile_start.py
"""

from __future__ import annotations

import cProfile
import pstats
import time

t0 = time.perf_counter()
c0 = time.process_time()
pr = cProfile.Profile()
pr.enable()
import gputui.ui.app  # noqa: E402,F401  (what the dashboard imports first)
from gputui.collect.live import LiveSource  # noqa: E402
from gputui.watch.watcher import Watcher  # noqa: E402

t_imp, c_imp = time.perf_counter() - t0, time.process_time() - c0
src = LiveSource()
t_src = time.perf_counter() - t0
w = Watcher()
for _ in range(2):
    w.update(src.sample())
t_two = time.perf_counter() - t0
pr.disable()
print(
    f"import {t_imp:.3f} s wall {c_imp:.3f} s CPU; LiveSource() at {t_src:.3f} s; "
    f"two samples + verdicts at {t_two:.3f} s; CPU {time.process_time() - c0:.3f} s"
)
pstats.Stats(pr).sort_stats("cumulative").print_stats(40)
pstats.Stats(pr).sort_stats("tottime").print_stats(25)
w.close()
src.close()
