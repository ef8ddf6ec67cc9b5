"""Build the stand-in libnvidia-ml.so.1 (standin.c) and run gputui against it.

The library is compiled once per test session into a temporary directory; a gputui
subprocess selects it through LD_LIBRARY_PATH (nvidia-ml-py opens "libnvidia-ml.so.1" by
name) and chooses the failure through GPUTUI_STANDIN_NVML (see standin.c).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent / "standin.c"
REPO = SOURCE.parents[2]

_built: dict[str, Path] = {}


def build_standin() -> Path:
    """The directory holding the compiled stand-in; skips the test when gcc is missing.

    Built once per test session, in a directory of its own rather than pytest's tmp_path:
    pytest prunes old base directories, and another session running at the same time (as
    the same user) could remove the library while a command still needs it.
    """
    if "dir" in _built:
        return _built["dir"]
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler (gcc) to build the stand-in libnvidia-ml.so.1")
    out = Path(tempfile.mkdtemp(prefix="gputui-nvml-standin-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    lib = out / "libnvidia-ml.so.1"
    r = subprocess.run(
        [gcc, "-shared", "-fPIC", "-O1", "-Wall", "-o", str(lib), str(SOURCE), "-lpthread"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, f"building the stand-in failed:\n{r.stderr}"
    _built["dir"] = out
    return out


def standin_env(libdir: Path, mode: str, pids: Sequence[int] = ()) -> dict[str, str]:
    """The environment of a gputui subprocess that uses the stand-in in `mode`; `pids`: real
    processes the stand-in lists on GPUs 0, 1, ... (a test's ranks)."""
    env = dict(os.environ)
    if pids:
        env["GPUTUI_STANDIN_PIDS"] = ",".join(map(str, pids))
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(libdir), env.get("LD_LIBRARY_PATH", "")) if p
    )
    env["GPUTUI_STANDIN_NVML"] = mode
    env["PYTHONUNBUFFERED"] = "1"
    return env


def gputui_argv(*args: str, alone: bool = False) -> list[str]:
    """`python -m gputui ARGS`; `alone`: in a PID namespace of its own (root, where `unshare`
    works), so that no process of a test running beside it is on its host (another test's
    real torch job waiting in a rendezvous is a hang gputui rightly reports). Only for runs
    that end by themselves: unshare's parent ignores SIGTERM."""
    prefix = _alone_prefix() if alone else []
    return [*prefix, sys.executable, "-m", "gputui", *args]


_ALONE: list[list[str]] = []


def _alone_prefix() -> list[str]:
    if not _ALONE:
        argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
        ok = os.geteuid() == 0 and shutil.which("unshare") is not None
        if ok:
            r = subprocess.run([*argv, "true"], capture_output=True, timeout=10)
            ok = r.returncode == 0
        _ALONE.append(argv if ok else [])
    return _ALONE[0]
