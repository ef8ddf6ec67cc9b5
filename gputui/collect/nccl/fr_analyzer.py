"""Read what PyTorch's flight-recorder analyzer (`torchfrtrace`) prints, into findings.

The analyzer (torch.distributed.flight_recorder.fr_trace) logs, per collective it cannot
match across ranks, a block such as

    Not all ranks joining collective, sequence number: 812
    group info: 0:default_pg
    collective: nccl:all_reduce
    missing ranks: {1}
    collective stack trace:
     all_reduce at .../torch/distributed/distributed_c10d.py:3245
    train_step at /job/train.py:44

and one-line verdicts ("We cannot decide what's wrong ... missed FR dumps from ranks ({2,
3})"). Each becomes a small dict; a traceback means the analyzer itself failed.
"""

from __future__ import annotations

import os
import re
from typing import Any

MAX_FINDINGS = 10

_BLOCKS = (
    (re.compile(r"^Not all ranks joining collective, sequence number: (\S+)"), "missing"),
    (re.compile(r"^Collective sequence number: (\S+) has errors"), "errors"),
    (re.compile(r"^Input/output mismatch in the collective sequence number: (\S+)"), "size"),
)
_KEYS = {
    "internal record id": "record",
    "group info": "group",
    "collective": "collective",
    "missing ranks": "missing_ranks",
    "world size": "world_size",
    "expected ranks": "expected_ranks",
    "collective state": "state",
    "error msg": "error",
}
_SETS = {"missing_ranks", "expected_ranks"}
_FRAME = re.compile(r"^\s*(\S.*?) at (\S+?):(\d+)\s*$")
_UNDECIDED = re.compile(r"missed FR dumps from ranks \((.*?)\)")


def _frame(m: re.Match[str]) -> str:
    """'func (file.py:12)', marked with a leading '~' when the file is torch's own."""
    mark = "~" if "/torch/" in m.group(2) else ""
    return f"{mark}{m.group(1)} ({os.path.basename(m.group(2))}:{m.group(3)})"


def parse_analyzer(text: str) -> tuple[list[dict[str, Any]], str | None]:
    """(findings, failure): the analyzer's reports, and its last error line if it failed."""
    found: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    in_frames = False
    for line in text.splitlines():
        s = line.strip()
        block = next(((k, m) for rx, k in _BLOCKS if (m := rx.match(s))), None)
        if block is not None:
            kind, m = block
            cur = {"kind": kind, "seq": int(m.group(1)) if m.group(1).isdigit() else m.group(1)}
            found.append(cur)
            in_frames = False
            continue
        if m := _UNDECIDED.search(s):
            missing = [int(x) for x in re.findall(r"-?\d+", m.group(1))]
            entry = {"kind": "undecided", "missing_dumps": missing}
            if cur is not None:
                entry.update({k: cur[k] for k in ("seq", "collective", "group") if k in cur})
            found.append(entry)
            continue
        if cur is None:
            continue
        if s.startswith("collective stack trace:"):
            in_frames, cur["frames"] = True, []
            continue
        key, sep, value = s.partition(": ")
        if sep and key in _KEYS and not in_frames:
            name = _KEYS[key]
            if name in _SETS:
                cur[name] = [int(x) for x in re.findall(r"-?\d+", value)]
            elif name == "world_size":
                cur[name] = int(value) if value.isdigit() else value
            else:
                cur[name] = value[:300]
            continue
        if in_frames and (fm := _FRAME.match(line)):
            if len(cur["frames"]) < 12:
                cur["frames"].append(_frame(fm))
            continue
        in_frames = False
    for f in found:  # the innermost frame outside torch: where the job called the collective
        frames = f.get("frames") or []
        user = [x for x in frames if not x.startswith("~")]
        f["frames"] = [x.lstrip("~") for x in frames]
        f["frame"] = user[0] if user else (f["frames"][0] if frames else None)
    failure = None
    if "Traceback (most recent call last)" in text:
        last = [ln.strip() for ln in text.splitlines() if ln.strip()]
        failure = last[-1][:300] if last else "the analyzer failed"
    return found[:MAX_FINDINGS], failure
