"""What `p` says when the alarm's suspect is a rank that is gone, and what a replay offers.

At the demo's dead-rank stop, `p` ("its stack", says the story bar) showed the stack of the
only row left: the waiting peer's, under the dead rank's name in the banner. A gone rank has
no stack; what it does have is why it left (its last words: an exception in its log, the
OOM killer, a signal), a core file it may have left (`c`), and the peers that wait for it
(`a`). So while the selection is the one the dashboard made (not a row a person chose), `p`
says that instead. A row chosen by hand still gets its own stack.
"""

from __future__ import annotations

from typing import Any

from gputui.ui.keys import shown
from gputui.ui.widgets.safe_text import Text


def gone_suspects(v: Any) -> list[tuple[int | None, int | None, int]]:
    """(rank, pid, GPU) of each suspect whose process is gone; [] unless every suspect is."""
    if v is None or not v.alarm or not v.suspects or not set(v.suspects) <= set(v.vanished):
        return []
    by_gpu = {e.get("gpu"): e for e in getattr(v, "stacks", ()) or () if isinstance(e, dict)}
    pids = list(v.suspect_pids)
    out = []
    for i, gpu in enumerate(v.suspects):
        e = by_gpu.get(gpu) or {}
        rank, pid = e.get("rank"), e.get("pid", pids[i] if i < len(pids) else None)
        out.append(
            (rank if isinstance(rank, int) else None, pid if isinstance(pid, int) else None, gpu)
        )
    return out


def _who(rank: int | None, pid: int | None, gpu: int) -> str:
    if rank is not None:
        return f"rank {rank}" + (f" (pid {pid})" if pid is not None else "")
    return f"pid {pid}" if pid is not None else f"GPU {gpu}'s rank"


def gone_text(v: Any, replay: bool) -> Text:
    """The pane `p` opens when the suspect is gone: why, and what each key offers instead."""
    from gputui.diagnose.gone.explain import crashed_cores

    t = Text()
    cores = {pid: core for _r, pid, core in crashed_cores(v)}
    ranked = getattr(v, "ranked", ()) or ()
    for rank, pid, gpu in gone_suspects(v):
        who = _who(rank, pid, gpu)
        t.append(f"{who} is gone: its process exited, so it has no stack to show.\n", style="bold")
        said = [f.text for f in ranked if f.source == "lastwords" and pid in f.pids]
        if said:
            t.append(f"Its last words: {said[0]}\n")
        else:
            where = "were recorded" if replay else "were found"
            t.append(
                f"No last words {where} (gputui reads a rank's log tail and the kernel's "
                "lines about it when it exits while gputui watches).\n"
            )
        core = cores.get(pid) if pid is not None else None
        c = shown("core")
        t.append(
            f"{c}: gdb on its core file, {core}\n"
            if core
            else f"{c}: it left no core file gputui found\n"
        )
    t.append(f"\n{shown('details')}: the verdict's details, every finding and the next steps\n")
    t.append(f"{shown('dump_all')}: the stacks of the ranks still running, which wait for it\n")
    t.append(f"up/down, then {shown('py_spy')}: one of those ranks' stack\n")
    return t
