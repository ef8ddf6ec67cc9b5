"""NVIDIA's Xid catalogue, and the kernel log's Xid lines read into events.

An Xid is the driver's error report for one GPU. NVML's event names the GPU and the number;
only the kernel log (`NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python3, ...`) also
names the process, which is what ties a fault to a rank. A line that is not what we expect
is skipped, never an error: the kernel log is untrusted text.

The catalogue says, for each number gputui knows, what it means, whose fault it is and what
to do (after NVIDIA's Xid catalogue in the GPU deployment and management documentation):

- `program`: a fault of the program on a healthy GPU (an illegal address, a device-side
  assert). The GPU stays usable; the rank that took it is the one that died.
- `hardware`: the GPU, its memory, its links or its firmware failed or is failing.
- `info`: a consequence of an earlier error (a channel cleaned up), no verdict of its own.

`severity` says what a hardware Xid makes of the GPU's health word: `failed` (drain it,
reset or reboot) or `degraded` (usable, watch it, reset at the next chance).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

PROGRAM, HARDWARE, INFO = "program", "hardware", "info"
FAILED, DEGRADED, OK = "failed", "degraded", "ok"


@dataclass(frozen=True)
class XidInfo:
    """What one Xid number means: `meaning` (a few words), whose fault, what to do."""

    xid: int
    meaning: str
    kind: str  # PROGRAM | HARDWARE | INFO
    severity: str  # FAILED | DEGRADED | OK (what it does to the GPU's health word)
    action: str


CATALOGUE: dict[int, XidInfo] = {
    x.xid: x
    for x in (
        XidInfo(13, "graphics engine exception (a bad kernel)", PROGRAM, OK, "fix the program"),
        XidInfo(
            31,
            "GPU memory page fault: an illegal memory access by the program",
            PROGRAM,
            OK,
            "the GPU is fine: see the rank's traceback (CUDA_LAUNCH_BLOCKING=1 locates it)",
        ),
        XidInfo(
            43,
            "GPU stopped the program's channel (a device-side assert or a fault)",
            PROGRAM,
            OK,
            "the GPU is fine: see the rank's traceback",
        ),
        XidInfo(45, "preemptive cleanup after an earlier error", INFO, OK, "see the Xid before it"),
        XidInfo(
            48, "double-bit ECC error (uncorrectable memory)", HARDWARE, FAILED, "reset the GPU"
        ),
        XidInfo(61, "internal micro-controller warning", HARDWARE, DEGRADED, "reset at a chance"),
        XidInfo(62, "internal micro-controller halt", HARDWARE, FAILED, "reset the GPU"),
        XidInfo(
            63,
            "row remapping recorded (a memory error contained)",
            HARDWARE,
            DEGRADED,
            "reset the GPU at the next chance to apply the remap",
        ),
        XidInfo(
            64, "row remapping failed", HARDWARE, FAILED, "drain the node; the GPU needs service"
        ),
        XidInfo(74, "NVLink error", HARDWARE, FAILED, "reset the GPU; if it recurs, drain"),
        XidInfo(79, "GPU fell off the bus", HARDWARE, FAILED, "drain the node"),
        XidInfo(
            92, "high single-bit ECC error rate", HARDWARE, DEGRADED, "watch it; drain if it grows"
        ),
        XidInfo(
            94,
            "contained uncorrectable memory error",
            HARDWARE,
            DEGRADED,
            "restart the job; reset the GPU at the next chance",
        ),
        XidInfo(95, "uncontained uncorrectable memory error", HARDWARE, FAILED, "reset the GPU"),
        XidInfo(119, "GSP firmware did not answer (RPC timeout)", HARDWARE, FAILED, "reset"),
        XidInfo(120, "GSP firmware error", HARDWARE, FAILED, "reset the GPU"),
        XidInfo(140, "unrecovered ECC error", HARDWARE, FAILED, "reset the GPU"),
        XidInfo(
            154,
            "the driver asks for a recovery action",
            HARDWARE,
            FAILED,
            "do what it asks (reset, reboot or drain)",
        ),
    )
}


def info(xid: int) -> XidInfo:
    """The catalogue's entry; an unknown number is a hardware report to look up.

    Args:
        xid: an Xid number, as the driver reported it.

    Returns:
        The catalogue's XidInfo: what it means, whose fault (program, hardware), what it does
        to the GPU's health word, what to do.
    """
    known = CATALOGUE.get(xid)
    if known is not None:
        return known
    return XidInfo(
        xid, "unknown to gputui", HARDWARE, DEGRADED, "look it up in NVIDIA's Xid catalogue"
    )


@dataclass(frozen=True)
class XidEvent:
    """One Xid (or a GPU fallen off the bus, `xid` 79), from NVML or the kernel log.

    `pci` is "dddd:bb:dd" as the kernel log writes it (None from NVML); `gpu` is the NVML
    index once known; `pid` and `name` come from the kernel log only. `text` is the line as
    the kernel wrote it (untrusted: shown through textsafe.clean).
    """

    t: float
    xid: int
    source: str  # "nvml" | "kernel"
    gpu: int | None = None
    pci: str | None = None
    pid: int | None = None
    name: str | None = None
    text: str = ""

    def to_json(self) -> dict[str, object]:
        i = info(self.xid)
        return {
            "t": round(self.t, 3),
            "xid": self.xid,
            "source": self.source,
            "gpu": self.gpu,
            "pci": self.pci,
            "pid": self.pid,
            "name": self.name,
            "meaning": i.meaning,
            "kind": i.kind,
            "text": self.text[:500],
        }


# `NVRM: Xid (PCI:0000:00:06): 31, pid=599, name=python3, channel 0x0000000a, ...`; older
# drivers write no pid/name (`NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.`)
# and some write `pid='<unknown>'`.
_XID = re.compile(
    r"NVRM: Xid \(PCI:(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-9a-fA-F])?\):"
    r" (?P<xid>\d{1,5})\b(?P<rest>.*)$"
)
_PID = re.compile(r"\bpid=(?P<pid>\d{1,10})\b")
_NAME = re.compile(r"\bname=(?P<name>[^,]{1,64})")
# `NVRM: GPU at PCI:0000:18:00: GPU-uuid` then `NVRM: GPU Board Serial Number: ...` then
# `NVRM: Xid ... 79`; the one-line form is `NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.`
_FALLEN = re.compile(
    r"NVRM: GPU (?:at PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
    r"(?:\.[0-9a-fA-F])?:? .*has fallen off the bus"
)


_PCI = re.compile(r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-9a-fA-F])?")


def pci_key(text: str) -> str | None:
    """ "00000000:00:06.0" (NVML) or "0000:00:06" (kernel log) -> "0000:00:06"; None if
    it is neither."""
    m = re.fullmatch(
        r"([0-9a-fA-F]{1,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-9a-fA-F])?", text
    )
    if m is None:
        return None
    return f"{int(m[1], 16):04x}:{m[2].lower()}:{m[3].lower()}"


def parse_line(text: str, t: float) -> XidEvent | None:
    """One kernel-log message -> an XidEvent, or None for any other line (or a bad one)."""
    if "NVRM" not in text:
        return None
    m = _XID.search(text)
    if m is not None:
        xid = int(m["xid"])
        if not 0 < xid < 100_000:
            return None
        rest = m["rest"]
        pid_m, name_m = _PID.search(rest), _NAME.search(rest)
        pid = int(pid_m["pid"]) if pid_m else None
        if pid is not None and not 0 < pid <= 4_194_304:
            pid = None
        name = name_m["name"].strip() if name_m else None
        return XidEvent(t, xid, "kernel", pci=pci_key(m["pci"]), pid=pid, name=name, text=text)
    m = _FALLEN.search(text)
    if m is not None:
        return XidEvent(t, 79, "kernel", pci=pci_key(m["pci"]), text=text)
    return None


def xid_events(lines: Iterable[object], pci_to_gpu: dict[str, int] | None = None) -> list[XidEvent]:
    """The Xid events of kernel-log lines (gputui.collect.kernlog.KernelLine: `t`, `text`),
    oldest first, each with its GPU index where `pci_to_gpu` knows its PCI address.

    For other consumers too (why a rank is gone: "Xid 31 on GPU 1" beside its death).
    """
    from dataclasses import replace

    out = []
    for line in lines:
        text, t = getattr(line, "text", None), getattr(line, "t", None)
        if not isinstance(text, str) or not isinstance(t, (int, float)):
            continue
        ev = parse_line(text, float(t))
        if ev is None:
            continue
        if pci_to_gpu and ev.pci is not None and ev.pci in pci_to_gpu:
            ev = replace(ev, gpu=pci_to_gpu[ev.pci])
        out.append(ev)
    return out


def recovery_action(text: str) -> str | None:
    """Xid 154's action in words ("GPU Reset Required", "Node Reboot Required", "Drain
    P2P"...), from `... changed from 0x0 (None) to 0x1 (GPU Reset Required)`."""
    m = re.search(r"to 0x[0-9a-fA-F]+ \(([^)]{1,60})\)", text)
    return m[1] if m else None
