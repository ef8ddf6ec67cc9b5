"""A recording whose every string holds terminal escapes, generated at test time.

A recording is anyone's file. Shown raw, an OSC sequence in it renames the terminal (OSC 0
and 2) or writes the clipboard (OSC 52); a CSI moves the cursor or clears the screen; a DCS
asks the terminal to answer; C1 controls do the same in one byte; bidi overrides reorder
what is shown. `write(path)` puts PAYLOAD into every string of every sample and of every
typed record gputui writes (meta, stacks, nccl, health, rendezvous, lastwords, error): once
with the keys that tie a record to its job kept (so the record is shown where a real one
would be), once with every string poisoned, job keys and outcomes included.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hostile_corpus import DT, T0, base_lines

from gputui.collect.procs.jobs import RANK_ENV_VARS

PAYLOAD = (
    "\x1b]2;PWNED-TITLE\x07"  # OSC 2: the window (tmux: pane) title
    "\x1b]0;PWNED-ICON\x1b\\"  # OSC 0, ended by ST
    "\x1b]52;c;UFdORUQtQ0xJUA==\x07"  # OSC 52: write "PWNED-CLIP" to the clipboard
    "\x1b[2J\x1b[1;1H\x1b[31m"  # CSI: clear the screen, move the cursor, red
    "\x1bP+q544e\x1b\\"  # DCS: ask the terminal for a capability
    "\x9d2;PWNED-C1\x9c"  # C1 OSC ... C1 ST
    "\x9b7m"  # C1 CSI: reverse video
    "\u202e\u2066"  # right-to-left override, left-to-right isolate
)
"""What every string carries; none of its control characters may reach a terminal."""

JOB = "master:127.0.0.1:29500"  # the job key of hostile_corpus's processes
KEEP = frozenset(
    {"type", "gputui", "job", "outcome", "trigger", "role", "kind", "thread", *RANK_ENV_VARS}
)
"""Keys whose values tie a record to its job (the rank variables make the job key) or pick
how it is shown, kept when `tied`
(`type` and meta's `gputui`, the version, bounded to 64 characters, are always kept)."""


def _poison(v: Any, keep: frozenset[str], key: str = "") -> Any:
    if isinstance(v, str):
        return v if key in keep else v + PAYLOAD
    if isinstance(v, list):
        return [_poison(x, keep, key) for x in v]
    if isinstance(v, dict):
        return {k: _poison(x, keep, k) for k, x in v.items()}
    return v


def _records(t: float) -> list[dict[str, Any]]:
    frames = [["synchronize", "torch/cuda/__init__.py", 1162], ["train_step", "train.py", 178]]
    rank = {"pid": 815, "rank": 0, "gpu": 0, "outcome": "done", "frames": frames}
    bad = {"pid": 816, "rank": 1, "gpu": 1, "outcome": "failed", "frames": [], "error": "denied"}
    listener = [815, "127.0.0.1:29500", "python3"]
    return [
        {
            "type": "stacks",
            "t": t,
            "job": JOB,
            "trigger": "stalled",
            "tool": "py-spy",
            "ranks": [{**rank, "thread": "active"}, bad],
        },
        {
            "type": "nccl",
            "t": t + 0.1,
            "job": JOB,
            "trigger": "stalled",
            "local": [{"pid": 815, "rank": 0, "gpus": [0]}],
            "ras": {"error": "RAS port closed", "queries": []},
            "flightrec": {"outcome": "off", "error": "TORCH_NCCL_DEBUG_INFO_PIPE_FILE is not set"},
        },
        {
            "type": "health",
            "t": t + 0.2,
            "started": T0,
            "notes": ["the kernel log cannot be read"],
            "events": [
                {
                    "t": t,
                    "xid": 79,
                    "source": "kmsg",
                    "gpu": 0,
                    "pci": "0000:00:06",
                    "pid": 815,
                    "name": "python3",
                    "text": "NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus.",
                }
            ],
        },
        {
            "type": "rendezvous",
            "t": t + 0.3,
            "jobs": [
                {
                    "job": JOB,
                    "world": 3,
                    "here": [{"pid": 815, "rank": 0}, {"pid": 816, "rank": 1}],
                    "missing_ranks": [2],
                    "missing_count": 1,
                    "since": T0,
                    "master_addr": "127.0.0.1",
                    "master_port": 29500,
                    "master_local": True,
                    "listeners": [listener],
                    "frame": "init_process_group (torch/distributed/rendezvous.py:88)",
                    "no_stack": None,
                }
            ],
        },
        {
            "type": "lastwords",
            "t": t + 0.4,
            "job": JOB,
            "trigger": "stalled",
            "core_pattern": "core",
            "kernel_error": "dmesg: read kernel buffer failed",
            "ranks": [
                {
                    "pid": 816,
                    "rank": 1,
                    "gone": True,
                    "seen": True,
                    "stderr": {"kind": "file", "path": "/job/rank1.err"},
                    "stdout": {"kind": "pipe", "holder": "torchrun (pid 7)"},
                    "log": "/job/rank1.err",
                    "gpus": [1],
                    "tail": "RuntimeError: CUDA error: an illegal memory access\n",
                    "kernel": [[t, "NVRM: Xid (PCI:0000:00:06): 31, pid=816, name=python3"]],
                }
            ],
        },
        {"type": "error", "t": t + 0.5, "job": JOB, "error": "RuntimeError('gatherer failed')"},
    ]


def lines(tied: bool, samples: int = 120, spin: bool = True) -> list[dict[str, Any]]:
    """The recording's lines: `samples` x DT seconds of GPU 0 spinning (else computing, so
    that the rendezvous record makes the verdict), every string poisoned (with `tied`, the
    keys in KEEP are left as they are)."""
    keep = KEEP if tied else frozenset({"type", "gputui"})
    out: list[dict[str, Any]] = [
        {"type": "meta", "t": T0 - 1, "host": "node-7", "gputui": "0.2.0", "interval": DT}
    ]
    samples_lines = base_lines(samples=samples, spin=spin)
    records = _records(T0 + samples * DT / 2)
    out += samples_lines[: len(samples_lines) // 2] + records
    out += samples_lines[len(samples_lines) // 2 :]
    return [_poison(copy.deepcopy(d), keep) for d in out]


def write(path: Path, tied: bool = True, samples: int = 120, spin: bool = True) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in lines(tied, samples, spin)))
    return path
