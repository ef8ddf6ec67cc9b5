"""Local stand-ins for gputui.watch's JobTarget while the Watcher is on another branch.

The NCCL gatherer reads only `key`, `trigger` and `ranks` of it (evidence-interface.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from gputui.collect.model import ProcessInfo
from gputui.diagnose.verdict import Verdict


@dataclass(frozen=True)
class JobTarget:
    key: str
    label: str
    trigger: str
    verdict: Verdict
    ranks: tuple[ProcessInfo, ...]
    dead_gpus: tuple[int, ...] = ()
