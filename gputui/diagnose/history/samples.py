"""One step of one GPU's columns as the live detector's GpuSample, so the same rule
(gputui.diagnose.hang.classify) judges history and live samples alike.

What the series cannot say directly:
- whether a process holds the GPU: dcgm-exporter names a pod on a GPU only while one is
  assigned to it, so a pod label means "in use"; without pod labels (a cluster without the
  kubelet mapping) framebuffer memory in use above CONTEXT_MB does (a CUDA context takes
  ~500 MiB; a free H200 reports a few MiB);
- memory-controller activity: DCGM_FI_DEV_MEM_COPY_UTIL is NVML's utilization.memory; where
  only DCGM_FI_PROF_DRAM_ACTIVE is exported its ratio stands in, in percent;
- the power limit: DCGM_FI_DEV_POWER_MGMT_LIMIT, else the enforced limit, else the model's
  usual limit (gputui.collect.prom.names.DEFAULT_LIMITS), said in a note.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import MISSING, fields

from gputui.collect.model import GpuSample
from gputui.collect.prom.columns import GpuColumns
from gputui.collect.prom.names import default_limit

CONTEXT_MB = 256.0
_IN_USE = (1,)  # a stand-in pid: the classifier asks only whether there is one
_DEFAULTS = {f.name: f.default for f in fields(GpuSample) if f.default is not MISSING}


def fast_sample(values: dict[str, object]) -> GpuSample:
    """GpuSample(**values), at a third of the cost: the frozen dataclass's __init__ sets
    its 17 fields one object.__setattr__ at a time, and a window of a cluster makes one
    sample per GPU per step (123,000 for 256 GPUs over 2 h). Equal to the constructed one
    (tests/test_prom_units.py); `na` is a fresh dict, as its default factory gives."""
    s = object.__new__(GpuSample)
    s.__dict__.update(_DEFAULTS, na={}, **values)
    return s


def _nan_col(n: int) -> array:
    return array("d", [math.nan]) * n


class GpuReader:
    """Reads a GPU's columns at a step; built once per GPU."""

    def __init__(self, g: GpuColumns, by_owner: bool) -> None:
        n = g.n
        c = g.cols
        self.g = g
        self.by_owner = by_owner
        self.util = c.get("util") or _nan_col(n)
        self.mem = c.get("mem_util") or c.get("dram") or _nan_col(n)
        self.power = c.get("power_w") or _nan_col(n)
        self.limit = c.get("power_limit_w") or c.get("enforced_limit_w")
        self.default_limit = None
        self.limit_note: str | None = None
        if self.limit is None or all(x != x for x in self.limit):
            self.limit = None
            self.default_limit = default_limit(g.model)
            if self.default_limit is not None:
                self.limit_note = (
                    f"no power limit exported: {g.model}'s usual {self.default_limit:g} W used"
                )
            else:
                self.limit_note = "no power limit exported: spinning judged from util and memory"
        self.used = c.get("mem_used_mb")
        self.procs = c.get("processes")
        self.sm = c.get("sm_mhz")
        self.seen = c.get("seen")
        self.owner = g.owner

    def when(self, k: int, grid_t: float) -> float:
        """The time the value read at step k was scraped (the step's own time where the
        server did not say): verdicts are stamped with the samples' times."""
        if self.seen is not None:
            x = self.seen[k]
            if x == x:
                return x
        return grid_t

    def present(self, k: int) -> bool:
        u = self.util[k]
        return u == u

    def sample(self, k: int) -> GpuSample:
        util, mem, power = self.util[k], self.mem[k], self.power[k]
        limit = self.limit[k] if self.limit is not None else self.default_limit
        used = self.used[k] if self.used is not None else math.nan
        return fast_sample(
            {
                "index": k,
                "util": util if util == util else None,
                "mem_util": mem if mem == mem else None,
                "power_w": power if power == power else None,
                "power_limit_w": limit if limit is not None and limit == limit else None,
                "mem_used_mb": used if used == used else None,
                "pids": _IN_USE if self.in_use(k) else (),
            }
        )

    def in_use(self, k: int) -> bool:
        if self.by_owner:
            return self.owner[k] >= 0
        if self.procs is not None and self.procs[k] == self.procs[k]:
            return self.procs[k] > 0
        if self.used is not None and self.used[k] == self.used[k]:
            return self.used[k] >= CONTEXT_MB
        return True
