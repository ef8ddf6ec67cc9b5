"""Is there an NVIDIA driver (or GPU) on this node, whatever NVML says?

When NVML cannot start, a health check must tell two cases apart: a node with no NVIDIA
driver (nothing to watch: `check` exits 0) and a node whose driver or GPUs are there but
NVML fails (a broken node: `check` exits 2). NVML's own error does not tell: "library not
found" is what both a CPU node and a GPU node with a broken install say. So we look at what
the kernel shows, cheaply and without calling into the driver:

1. `/proc/driver/nvidia/version`: the NVIDIA kernel module is loaded;
2. `/dev/nvidiactl`: the driver's control device exists (created when the module loads, and
   what a container gets when it is given GPUs);
3. `/sys/bus/pci/devices/*`: an NVIDIA (vendor 0x10de) display or 3D controller (class
   0x0300 or 0x0302) is on the PCI bus, even though no driver is loaded for it.

A library that loads and then fails in nvmlInit with any other error than "driver not
loaded" is itself a sign of a driver (the caller decides that; see nvml.py).
"""

from __future__ import annotations

from pathlib import Path

NVIDIA_PCI_VENDOR = "0x10de"
GPU_PCI_CLASSES = ("0x0300", "0x0302")  # VGA-compatible and 3D controllers
MAX_PCI_DEVICES = 4096  # a bound on the directory walk, far above any real machine


def _read(path: Path) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(64).strip()
    except OSError:
        return ""


def driver_evidence(root: Path = Path("/")) -> str | None:
    """A short phrase naming what shows an NVIDIA driver or GPU here, or None.

    `root` is for tests (a directory laid out like /); gputui always passes /.
    """
    if (root / "proc/driver/nvidia/version").exists():
        return "the NVIDIA kernel module is loaded (/proc/driver/nvidia/version)"
    if (root / "dev/nvidiactl").exists():
        return "/dev/nvidiactl exists"
    pci = root / "sys/bus/pci/devices"
    try:
        entries = sorted(pci.iterdir())[:MAX_PCI_DEVICES]
    except OSError:
        return None
    for dev in entries:
        if _read(dev / "vendor") != NVIDIA_PCI_VENDOR:
            continue
        if _read(dev / "class").startswith(GPU_PCI_CLASSES):
            return f"an NVIDIA GPU is on the PCI bus ({dev.name})"
    return None
