"""README.txt of a bundle: what each of its files holds, and the notes of what is missing.

The person who opens a bundle may not know gputui: the README says, file by file, what is
there and how to look at it (the trace replays with `gputui --replay`), and every note says
what could not be had and why, so a missing part is never mistaken for nothing found.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime


def readme_lines(
    host: str,
    recorded_node: str | None,
    made_from: str | None,
    files: Sequence[str],
    notes: Sequence[str],
) -> list[str]:
    """The README's lines for a bundle of `files` (those written so far), with its `notes`.
    `recorded_node`: the bundle was made from that node's recording (`made_from` says which)."""
    what = {
        "trace.jsonl.gz": "recent samples; replay with: gputui --replay trace.jsonl.gz",
        "verdict.json": "the hang detector's verdict at the last sample, with what the "
        "stacks say (findings, the culprit's frame, each rank's stack)",
        "stacks/groups.txt": "identical stacks grouped, the odd group marked",
        "processes.json": "command line, environment (secrets redacted), CUDA/NCCL libs",
        "health.json": "each GPU's health word and counters, each Xid with its kernel line",
        "topology.txt": "nvidia-smi topo -m",
        "lastwords/kernel.txt": "kernel log lines about processes (OOM killer, segfaults, Xid); "
        "lastwords/pid-N.txt: each rank's log tail and where it writes",
        "host.json": "node, gputui version, attach tools present, ptrace settings"
        if recorded_node is None
        else "the recorded node, what the bundle was made from, by which gputui",
        "debugserver.txt": "each rank's host, line and collective from PyTorch's debug server",
    }
    when = datetime.now().isoformat(timespec="seconds")
    readme = [
        f"gputui incident bundle, {when} on {host}"
        if recorded_node is None
        else f"gputui incident bundle, {when}, made from {made_from or 'a recording'} of "
        f"{host}: it holds only what the recording holds, nothing of the machine that "
        "wrote it (no kernel log, processes, libraries, topology or settings of that host)",
        "",
        *(f"{name:<20} {text}" for name, text in what.items() if name in files),
        *(f"{name:<20} py-spy dump" for name in files if name.startswith("stacks/pid-")),
        "",
        *(f"note: {n}" for n in notes),
    ]
    return readme
