"""The hang detector over a cluster's history (`check --prometheus`): the same per-GPU rule
as the live detector (gputui.diagnose.hang.classify, runs), run over columns per job
instead of one Snapshot per sample, across nodes.

`jobs` groups GPUs into jobs from their labels, `samples` turns a step of columns into the
live detector's GPU sample, `judge` follows each job's spinning over the window and says
when it stalled, who spun and who did not, `counters` reads Xids and error counters (resets
included), `slow` asks the straggler rule of gputui.diagnose.slow over the window.
"""

from __future__ import annotations

from gputui.faces import lazy_face

__all__ = [
    "gpu_ref",
    "GpuReader",
    "job_key",
    "judge_window",
    "Judgement",
    "one_job_per_node",
    "sample_time",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "job_key": "jobs",
    "one_job_per_node": "jobs",
    "gpu_ref": "judge",
    "sample_time": "judge",
    "GpuReader": "samples",
    "judge_window": "window",
    "Judgement": "window",
}


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
