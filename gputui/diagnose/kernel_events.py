"""What the kernel did to a process, read from one kernel log line: the OOM killer, a
segfault or trap, an Xid on its GPU.

Why apart from the last words (gone/lastwords) that quote it: the same line answers two
questions, why a rank is gone (its last words, after the fact) and why a child of a waiting
rank vanished (the hang's children, while the job lives), and a third, what the incident
bundle keeps of the kernel log. Pure: a line in, a KernelEvent or None out; the lines come
bounded from the reader (gputui.collect.kernlog) or a bundle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_OOM_KILL = re.compile(r"(?:Memory cgroup )?[Oo]ut of memory: Killed process (\d+) \(([^)]*)\)")
_OOM_KILL2 = re.compile(r"oom-kill:.*?\bpid=(\d+)")
_SEGV = re.compile(r"(\S+)\[(\d+)\]: segfault at (\S+) ip \S+ sp \S+ error \d+(?: in ([^\[\s]+))?")
_TRAP = re.compile(
    r"traps: (\S+)\[(\d+)\] (general protection|trap [^ ]+)[^\n]*?(?: in ([^\[\s]+))?"
)
_XID = re.compile(r"NVRM: Xid \(PCI:([^)]+)\): (\d+), pid=(\d+)")


@dataclass(frozen=True)
class KernelEvent:
    """A kernel line about one pid: how (oom-kill, segfault, xid), the raw line, when."""

    how: str
    pid: int
    t: float
    text: str  # the raw line, for evidence
    lib: str | None = None  # the library a segfault happened in
    xid: int | None = None

    def sentence(self) -> str:
        if self.how == "oom-kill":
            return "killed by the OOM killer"
        if self.how == "segfault":
            return f"segfault in {self.lib}" if self.lib else "segfault"
        if self.how == "trap":
            return f"crashed ({self.text.split(']', 1)[-1].strip()[:80]})"
        return f"Xid {self.xid} on its GPU"


def parse_kernel(line: str, t: float = 0.0) -> KernelEvent | None:
    """One kernel line about a process: the OOM killer, a segfault or trap, an Xid."""
    if m := _OOM_KILL.search(line):
        return KernelEvent("oom-kill", int(m.group(1)), t, line)
    if m := _OOM_KILL2.search(line):
        return KernelEvent("oom-kill", int(m.group(1)), t, line)
    if m := _SEGV.search(line):
        return KernelEvent("segfault", int(m.group(2)), t, line, lib=m.group(4))
    if m := _TRAP.search(line):
        return KernelEvent("trap", int(m.group(2)), t, line, lib=m.group(4))
    if m := _XID.search(line):
        return KernelEvent("xid", int(m.group(3)), t, line, xid=int(m.group(2)))
    return None


def kernel_events(
    lines: list[tuple[float, str]], pid: int, born: float | None, slack: float = 1.0
) -> tuple[KernelEvent, ...]:
    """Kernel events about `pid`, only from after the process was born: a pid number is
    reused, and an older line about it is about another process."""
    out = []
    for t, text in lines:
        if str(pid) not in text:
            continue
        ev = parse_kernel(text, t)
        if ev is None or ev.pid != pid:
            continue
        if born is not None and t and t < born - slack:
            continue
        out.append(ev)
    return tuple(out)
