"""Finding the attach tools, and saying how to get the ones that are missing.

A GPU node may have any subset of py-spy, gdb, cuda-gdb and strace (the 2 x H200 nodes we
measured had only cuda-gdb, off PATH in /usr/local/cuda/bin). pip puts py-spy next to the
Python that installed it, which need not be on PATH either (a venv used without activating
it, or wheels unpacked onto PYTHONPATH with their bin/ beside them), so those places are
searched too.

`GPUTUI_TOOL_PATH`, when set, replaces every search place: tests (and users) use it to
run gputui as if a tool were not installed.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from pathlib import Path

TOOL_PATH_ENV = "GPUTUI_TOOL_PATH"

INSTALL_HINTS = {
    "py-spy": "pip install py-spy (into any Python; gputui also looks beside sys.executable)",
    "gdb": "apt-get install gdb (dnf install gdb on RHEL-likes)",
    "cuda-gdb": "part of the CUDA toolkit: /usr/local/cuda/bin/cuda-gdb",
    "strace": "apt-get install strace (dnf install strace on RHEL-likes)",
    "nvidia-smi": "comes with the NVIDIA driver",
}


def _python_bin_dirs() -> list[str]:
    """Where pip may have put console scripts for the Python running gputui."""
    dirs = [str(Path(sys.executable).parent), os.path.join(sys.prefix, "bin")]
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        p = Path(entry).resolve()
        dirs.append(str(p / "bin"))  # pip install --target DIR puts scripts in DIR/bin
        if p.name in ("site-packages", "dist-packages") and len(p.parents) >= 3:
            dirs.append(str(p.parents[2] / "bin"))  # <prefix>/lib/pythonX.Y/site-packages
    return dirs


def _cuda_bin_dirs() -> list[str]:
    dirs = []
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        if os.environ.get(var):
            dirs.append(os.path.join(os.environ[var], "bin"))
    dirs.append("/usr/local/cuda/bin")
    dirs.extend(sorted(glob.glob("/usr/local/cuda-*/bin"), reverse=True))  # newest first
    return dirs


def search_dirs(name: str, path: str | None = None) -> list[str]:
    """The directories searched for `name`, in order, without duplicates.

    `path` (os.pathsep-separated) or $GPUTUI_TOOL_PATH, when given, is the whole search.
    """
    explicit = path if path is not None else os.environ.get(TOOL_PATH_ENV)
    if explicit is not None:
        dirs = explicit.split(os.pathsep)
    else:
        dirs = os.environ.get("PATH", os.defpath).split(os.pathsep)
        if name == "py-spy":
            dirs += _python_bin_dirs()
        if name in ("cuda-gdb", "nvidia-smi"):
            dirs += _cuda_bin_dirs()
        dirs += ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    seen: set[str] = set()
    out = []
    for d in dirs:
        if d and d not in seen:
            seen.add(d)
            out.append(d)
    return out


def find_tool(name: str, path: str | None = None) -> str | None:
    """Full path of an executable `name`, or None when it is not installed."""
    found = shutil.which(name, path=os.pathsep.join(search_dirs(name, path)))
    return found


def install_hint(name: str) -> str:
    return INSTALL_HINTS.get(name, f"install {name}")


def missing_message(name: str, path: str | None = None) -> str:
    """`py-spy not found (looked in PATH, ...): pip install py-spy`."""
    where = "$" + TOOL_PATH_ENV if (path or os.environ.get(TOOL_PATH_ENV)) else "PATH"
    extra = {"py-spy": " and beside this Python", "cuda-gdb": " and /usr/local/cuda*/bin"}
    looked = f"looked in {where}" + ("" if where != "PATH" else extra.get(name, ""))
    return f"{name} not found ({looked}): {install_hint(name)}"


def native_debugger(path: str | None = None) -> tuple[str, str] | None:
    """(name, executable) of the debugger for native backtraces: gdb, else cuda-gdb.

    gdb is preferred because it attaches in well under a second; cuda-gdb is a gdb too
    (same commands) and also shows the GPU kernel a rank is stuck in, but took 11-14 s.
    """
    for name in ("gdb", "cuda-gdb"):
        exe = find_tool(name, path)
        if exe:
            return name, exe
    return None


def available_tools(path: str | None = None) -> dict[str, str | None]:
    """Each known tool -> its path or None; for the bundle and the help text."""
    return {name: find_tool(name, path) for name in ("py-spy", "gdb", "cuda-gdb", "strace")}
