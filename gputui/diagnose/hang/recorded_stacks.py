"""Every rank's recorded stack, identical ones grouped: `a` and `b` on a replay.

A recording carries the stack dumps gputui took at the stall (`{"type": "stacks"}` records,
which the Watcher puts in `Verdict.stacks`, one entry per rank). In a replay the processes are
not on this machine, so `a` cannot dump them again; it shows these entries grouped the way a
live `a` groups its own dumps (the odd rank, the one not where the others wait, first).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gputui.diagnose.hang.threads import entry_lines


@dataclass(frozen=True)
class RecordedGroup:
    """Ranks whose recorded main-thread stacks are the same."""

    entries: tuple[dict[str, Any], ...]

    @property
    def odd(self) -> bool:
        """The suspect's group: where the ranks that hold the others up stand."""
        return any(e.get("role") == "suspect" for e in self.entries)

    def header(self) -> str:
        ranks = [str(e["rank"]) for e in self.entries if e.get("rank") is not None]
        pids = [str(e.get("pid")) for e in self.entries]
        who = ("rank " if len(ranks) == 1 else "ranks ") + ",".join(ranks) if ranks else "ranks ?"
        gpus = ",".join(str(e.get("gpu")) for e in self.entries if e.get("gpu") is not None)
        role = self.entries[0].get("role") or ""
        mark = "ODD  " if self.odd else ""
        where = f" · GPU {gpus}" if gpus else ""
        return f"{mark}{who} (pid {','.join(pids)}){where} · {role}".rstrip(" ·")

    def body(self) -> list[str]:
        e = self.entries[0]
        if e.get("outcome") not in (None, "done"):
            return [f"{e.get('outcome')}: {e.get('error') or 'no stack'}"]
        return entry_lines(e) or ["    (no frames)"]


def _key(e: dict[str, Any]) -> tuple[Any, ...]:
    if e.get("outcome") not in (None, "done"):
        return ("failed", e.get("outcome"), e.get("role"))
    return ("stack", tuple(e.get("stack") or ()), e.get("role"))


def group_recorded(entries: Iterable[dict[str, Any]]) -> tuple[RecordedGroup, ...]:
    """Groups of identical stacks, the suspect's first, then the biggest."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for e in entries:
        groups.setdefault(_key(e), []).append(e)
    out = [RecordedGroup(tuple(v)) for v in groups.values()]
    out.sort(key=lambda g: (not g.odd, -len(g.entries)))
    return tuple(out)


def recorded_lines(entries: Sequence[dict[str, Any]]) -> list[str]:
    """The grouped stacks as text (the `a` pane of a replay, a replay bundle's groups.txt)."""
    groups = group_recorded(entries)
    lines = [f"{len(entries)} rank(s) in {len(groups)} group(s), recorded at the stall"]
    for g in groups:
        lines += ["", g.header(), *g.body()]
    return lines
