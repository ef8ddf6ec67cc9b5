"""Every child of a rank: the DataLoader worker, spawn child or compile worker it waits for.

Why: a rank whose main thread waits in `for batch in loader` shows `Queue.get` and its own
loop line; the cause is in the worker that never sends its batch (PyTorch issue 87995: 31
ranks in all_reduce, rank 0 "stuck at dataloader", and no way to see which worker). The
stacks record carries each child's dump (gputui.tools.attach.children); this reads it.

A child is stuck when its main thread stands in user code (the dataset's fetch function)
while its rank waits on a queue, a pipe or a future. An idle worker waits on its own index
queue, in library code only: not stuck. A forked child's stack still holds its parent's
frames outside its entry point (`BaseProcess._bootstrap`): those are cut, or every worker
would seem to stand on the parent's `for batch in loader` line.

Pure: reads `RankStack.children`, which a record written before children were kept does not
have: such a rank has no stuck child, as before.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gputui.collect.frames import ChildStack, Frame, RankStack
from gputui.diagnose.hang.stack_reading import is_library, read_stack
from gputui.diagnose.kernel_events import parse_kernel

# The main thread's innermost functions when it waits on something a child feeds.
_WAITS = re.compile(
    r"(^|\.)(get|poll|_poll|wait|select|recv|recv_bytes|_recv|_recv_bytes|result|join|"
    r"_try_get_data|_get_data|_next_data|__next__|acquire|communicate|read)$"
)
_ENTRIES = ("_bootstrap", "BaseProcess.run", "spawn_main", "_main")


@dataclass(frozen=True)
class StuckChild:
    child: ChildStack
    frame: Frame  # its innermost user frame

    def words(self, rank_who: str, rank_line: Frame | None) -> str:
        line = rank_line.label() if rank_line is not None else None
        return child_sentence(self.child.role, rank_who, self.child.pid, self.frame.label(), line)


def child_sentence(role: str, rank_who: str, pid: int, frame: str, rank_line: str | None) -> str:
    """`DataLoader worker 1 of rank 1 (pid 908) is stuck in fetch_record (data.py:31); rank
    1 waits for it at main (train.py:133)`: the same words from the stall's dump and from
    the progress dumps, so the verdict says it once."""
    line = f"{role} of {rank_who} (pid {pid}) is stuck in {frame}"
    if rank_line:
        line += f"; {rank_who} waits for it at {rank_line}"
    return line


def own_frames(frames: Sequence[Frame]) -> tuple[Frame, ...]:
    """A child's frames inside its own entry point: a forked child's stack goes on into
    its parent's (`DataLoader.__iter__`, the parent's loop line), which are not its code."""
    for i, f in enumerate(frames):
        if f.function.rsplit(".", 1)[-1] in ("_bootstrap", "spawn_main") or f.function in _ENTRIES:
            return tuple(frames[:i])
    return tuple(frames)


def waits_on_child(frames: Sequence[Frame]) -> bool:
    """Whether a main thread waits on a queue, pipe, future or process (not a collective)."""
    inner = [f for f in frames[:12] if is_library(f)]
    return any(_WAITS.search(f.function) for f in inner)


def stuck_child(s: RankStack) -> StuckChild | None:
    """The child a rank waits for that stands in its own code, when the rank waits on one."""
    if not s.ok or not s.children or not waits_on_child(s.frames):
        return None
    for c in s.children:
        if c.outcome != "done":
            continue
        mine = own_frames(c.frames)
        reading = read_stack(mine)
        if reading.frame is not None and not is_library(reading.frame):
            return StuckChild(c, reading.frame)
    return None


# torch's words when a worker dies under its rank: "DataLoader worker (pid 4242) is killed
# by signal: Killed." (its SIGCHLD handler), or only "DataLoader worker (pid(s) 4242) exited
# unexpectedly" when its status check finds the worker gone first (the worker already
# reaped: seen in a live run, SIGKILL sent, the first words never printed). The signal is
# said by strsignal's description.
_KILLED = re.compile(r"DataLoader worker \(pid (\d+)\) is killed by signal: ([A-Za-z][\w ]*)")
_EXITED = re.compile(r"DataLoader worker \(pid\(s\) (\d+)(?:, \d+)*\) exited unexpectedly")


def _signal_named(description: str) -> signal.Signals | None:
    for s in signal.Signals:
        try:
            if signal.strsignal(s) == description.strip():
                return s
        except ValueError:
            continue
    return None


def killed_child(text: str) -> tuple[int, str | None] | None:
    """(pid, "SIGKILL (signal 9)") of a DataLoader worker a rank's output says was killed;
    (pid, None) when torch only says it exited unexpectedly (how, it did not learn).

    The rank printed it, so the worker was on the rank's node: a death told from it is on
    this node whenever the rank is (never "on another node")."""
    m = _KILLED.search(text)
    if m is None:
        gone = _EXITED.search(text)
        return (int(gone.group(1)), None) if gone is not None else None
    sig = _signal_named(m.group(2))
    said = f"{sig.name} (signal {int(sig)})" if sig is not None else f"signal {m.group(2)!r}"
    return int(m.group(1)), said


def killed_child_cause(
    text: str, kernel: Iterable[str] = (), where: str = "this node"
) -> str | None:
    """`its DataLoader worker (pid 4242) was killed by SIGKILL (signal 9) on this node, as
    the OOM killer does (see `dmesg`)`: why a rank whose output says so died (torch raises
    in the rank when a worker dies), or None. When torch only says the worker exited
    unexpectedly, the sentence says that and names no signal. `kernel`: the kernel log's
    lines at hand; one where the OOM killer names the worker's pid makes it "killed by the
    OOM killer".
    `where`: the rank's node as the caller knows it (the worker ran beside the rank)."""
    got = killed_child(text)
    if got is None:
        return None
    pid, sig = got
    oom = any(
        (k := parse_kernel(line)) is not None and k.how == "oom-kill" and k.pid == pid
        for line in kernel
    )
    if oom:
        how = f" ({sig})" if sig else ""
        return f"its DataLoader worker (pid {pid}) was killed by the OOM killer{how} on {where}"
    if sig is None:
        return (
            f"its DataLoader worker (pid {pid}) exited unexpectedly on {where}; torch did not "
            "say how (a worker killed by the OOM killer often reads so: see `dmesg`)"
        )
    line = f"its DataLoader worker (pid {pid}) was killed by {sig} on {where}"
    if sig.startswith("SIGKILL"):
        line += ", as the OOM killer does (see `dmesg`)"
    return line
