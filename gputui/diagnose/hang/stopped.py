"""A suspect rank whose process is stopped by a signal: SIGSTOP, or Ctrl-Z in its terminal.

Why a rule of its own: a stopped rank keeps its CUDA context, so its GPU reads idle and the
detector names it a suspect "idle with its process alive", and its peers spin in the
collective it never enters. A person then takes its stack, and the stack shows wherever
the signal froze it (a data loader, a print): a culprit line that is no bug at all. The
process's own status says what happened, and one command ends the hang: `kill -CONT`.

Only psutil's "stopped" (the kernel's `T`) counts. "tracing-stop" (`t`) is left alone on
purpose: gputui's own py-spy and gdb put a rank there for the moment they read its stack
(gputui.watch gathers them at every stall), so it says nothing about the hang.

The status comes from the Snapshot (gputui.collect.procs.reader reads it for every process
on a GPU; a recording keeps it), so a replay names a stopped rank as the live run did.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputui.collect.model import Snapshot

STOPPED = "stopped"  # psutil.STATUS_STOPPED, as ProcessInfo.state holds it


def stopped_pids(snap: Snapshot, pids: Iterable[int]) -> tuple[int, ...]:
    """The pids among `pids` whose process is stopped by a signal at this sample.

    Args:
        snap: the sample; its processes carry psutil's status.
        pids: the processes of one suspect GPU.

    Returns:
        Those stopped, in the order given; empty when none is (or none is known).
    """
    out = []
    for pid in pids:
        p = snap.process(pid)
        if p is not None and p.state == STOPPED:
            out.append(pid)
    return tuple(out)


def stopped_words(snap: Snapshot, pids: Iterable[int]) -> str | None:
    """What a suspect GPU's entry in the stall's reason says when its process is stopped.

    Args:
        snap: the sample the verdict is for.
        pids: the processes of the suspect GPU.

    Returns:
        "(its process is stopped: ...; `kill -CONT 1001` resumes it)", or None when no
        process of the GPU is stopped (the detector then says what the GPU does).
    """
    stopped = stopped_pids(snap, pids)
    if not stopped:
        return None
    who = "its process is" if len(stopped) == 1 else "its processes are"
    listed = " ".join(map(str, stopped))
    return (
        f"({who} stopped by a signal (SIGSTOP, or Ctrl-Z in its terminal): nothing in its "
        f"code waits, and `kill -CONT {listed}` resumes it)"
    )
