"""Which CUDA, NCCL and torch libraries a process has loaded, and their versions.

The loaded library is what matters, not what is installed: a job can carry its own NCCL (a
pip wheel, a container, LD_LIBRARY_PATH), and its version decides what NCCL can say (RAS
needs 2.24). Read from /proc/PID/maps, which names every mapped file; a wheel's soname
(libnccl.so.2) carries no version, so the wheel's dist-info beside it is read. The incident
bundle keeps the list per process, and the NCCL gatherer reads the version from it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# (name, pattern on the file name in /proc/PID/maps); group 1 is the version in the name.
_LIBS = (
    ("nccl", re.compile(r"^libnccl\.so(?:\.([\d.]+))?$")),
    ("cudart", re.compile(r"^libcudart\.so(?:\.([\d.]+))?$")),
    ("cuda_driver", re.compile(r"^libcuda\.so(?:\.([\d.]+))?$")),
    ("cublas", re.compile(r"^libcublas\.so(?:\.([\d.]+))?$")),
    ("cudnn", re.compile(r"^libcudnn\.so(?:\.([\d.]+))?$")),
    ("nvshmem", re.compile(r"^libnvshmem_host\.so(?:\.([\d.]+))?$")),
    ("torch", re.compile(r"^libtorch_python\.so$")),
)
# pip wheels ship sonames only (libnccl.so.2): the wheel's dist-info names the version.
_WHEELS = {"nccl": "nvidia_nccl", "cudart": "nvidia_cuda_runtime", "cublas": "nvidia_cublas"}


def _wheel_version(lib: Path, prefix: str) -> str | None:
    for parent in lib.parents:
        if parent.name in ("site-packages", "dist-packages"):
            for d in sorted(parent.glob(prefix + "*.dist-info")):
                return d.name[: -len(".dist-info")].rpartition("-")[2]
            return None
    return None


def _torch_version(lib: Path) -> str | None:
    try:
        text = (lib.parent.parent / "version.py").read_text()
    except OSError:
        return None
    m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
    return m.group(1) if m else None


def process_libraries(pid: int) -> dict[str, dict[str, str | None]]:
    """CUDA/NCCL/torch libraries a process has mapped: {name: {path, version}}.

    The loaded library is what matters, not what is installed: a job can carry its own NCCL.

    Args:
        pid: the process whose /proc/PID/maps is read.

    Returns:
        Each library found by name, with its path and version (None where neither the name
        nor the wheel beside it tells); empty when the maps cannot be read.
    """
    try:
        with open(f"/proc/{pid}/maps") as f:
            paths = {ln.split(None, 5)[5].strip() for ln in f if ln.count(" ") >= 5 and "/" in ln}
    except (OSError, IndexError):
        return {}
    found: dict[str, dict[str, str | None]] = {}
    for path in sorted(paths):
        base = os.path.basename(path.replace(" (deleted)", ""))
        for name, rx in _LIBS:
            m = rx.match(base)
            if not m or name in found:
                continue
            version = m.group(1) if m.groups() else None
            lib = Path(path)
            if name == "torch":
                version = _torch_version(lib)
            elif name in _WHEELS and (version is None or "." not in version):
                version = _wheel_version(lib, _WHEELS[name]) or version
            found[name] = {"path": path, "version": version}
    return found
