"""The incident bundle: what it holds, and that no secret ever lands in it."""

from __future__ import annotations

import _ctypes
import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, run_cli
from targets.launch import Targets

from gputui.collect.model import GpuSample, ProcessInfo, Snapshot
from gputui.collect.procs.libraries import process_libraries
from gputui.collect.trace.format import read_trace
from gputui.tools.bundle import write as bundle_mod
from gputui.tools.bundle.write import write_bundle
from gputui.tools.which import find_tool

needs_py_spy = pytest.mark.skipif(find_tool("py-spy") is None, reason="py-spy is not installed")

SECRETS = {
    "HF_TOKEN": "hf_" + "Q" * 30,
    "MY_SERVICE_PASSWORD": "plain-pw-4711",
    "WANDB_API_KEY": "wandb-secret-0815",
    "DATABASE_URL": "postgres://trainer:url-pw-2323@db:5432/runs",
}
SECRET_VALUES = ["QQQQQQQQQQ", "plain-pw-4711", "wandb-secret-0815", "url-pw-2323", "argv-9191"]


@pytest.fixture
def targets() -> Iterator[Targets]:
    t = Targets()
    yield t
    t.close()


def all_text(root: Path) -> dict[str, str]:
    """Every file of the bundle as text, gzip files decompressed."""
    out = {}
    for f in root.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            if f.suffix == ".gz":
                data = gzip.decompress(data)
            out[str(f.relative_to(root))] = data.decode("utf-8", "replace")
    return out


@needs_py_spy
def test_bundle_cli_writes_stacks_env_and_cmdline_with_every_secret_redacted(targets, tmp_path):
    env = {**SECRETS, "NCCL_DEBUG": "INFO", "MASTER_PORT": "29511", "RANK": "3"}
    p = targets.start("loader", env=env, extra_args=("--api-key=argv-9191", "--token", "argv-9191"))
    out = tmp_path / "b"
    r = run_cli("bundle", "--pid", str(p.pid), "--out", str(out), "--seconds", "0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith(f"bundle written to {out}")
    files = all_text(out)
    for name, text in files.items():
        for secret in SECRET_VALUES:
            assert secret not in text, f"{secret} leaked into {name}"
    assert "wait_for_the_data_loader" in files[f"stacks/pid-{p.pid}.txt"]
    (rec,) = json.loads(files["processes.json"])
    assert rec["environ"]["NCCL_DEBUG"] == "INFO"  # ordinary settings stay readable
    assert rec["environ"]["HF_TOKEN"] == "<redacted>"
    assert rec["environ"]["DATABASE_URL"] == "postgres://trainer:<redacted>@db:5432/runs"
    assert rec["rank"] == 3
    assert "--api-key=<redacted>" in rec["cmdline"]
    host = json.loads(files["host.json"])
    assert set(host["tools"]) == {"py-spy", "gdb", "cuda-gdb", "strace"}
    assert "README.txt" in files and "topology.txt" in files
    if find_tool("nvidia-smi") is None:
        assert "nvidia-smi not found" in files["topology.txt"]


def test_bundle_defaults_to_a_dated_directory_in_the_current_one(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "bundle", "--demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert r.returncode == 1, r.stderr  # the demo's verdict is a hang: never 0 on any face
    (d,) = list(tmp_path.iterdir())
    assert d.name.startswith("gputui-bundle-") and d.is_dir()
    assert r.stdout.startswith(f"bundle written to {d.name}")
    snaps = read_trace(d / "trace.jsonl.gz")  # a replayable trace
    # The demo up to the moment its verdict names the hang (tests/test_verdict_moment.py).
    assert len(snaps) > 50 and snaps[-1].gpus and snaps[-1].phase == "stall_in_loop_dumping"
    # Recorded processes are not attached to here: the bundle holds the recorded stacks.
    groups = (d / "stacks" / "groups.txt").read_text()
    assert "ODD  rank 1 (pid 815)" in groups and "<module> (worker2.py:37)" in groups


def test_bundle_refuses_a_non_empty_directory_and_a_missing_pid(tmp_path):
    (tmp_path / "x").write_text("keep me")
    r = run_cli("bundle", "--demo", "--out", str(tmp_path))
    assert r.returncode == 2 and "not an empty directory" in r.stderr
    assert (tmp_path / "x").read_text() == "keep me"
    r = run_cli("bundle", "--pid", "99999999", "--out", str(tmp_path / "new"))
    assert r.returncode == 2 and "no process with pid 99999999" in r.stderr


class _Verdict:
    def to_json(self):
        return {"state": "hang", "suspects": [1]}


def test_trace_in_the_bundle_has_command_line_secrets_redacted(tmp_path):
    proc = ProcessInfo(
        pid=4242,
        create_time=1.0,
        cmdline=("python", "train.py", "--password", "argv-9191"),
        gpus=(0,),
        live=False,
    )
    snap = Snapshot(t=1.0, gpus=(GpuSample(index=0, pids=(4242,)),), processes=(proc,))
    rep = write_bundle(tmp_path / "b", snapshots=[snap], verdict=_Verdict())
    files = all_text(rep.path)
    assert "argv-9191" not in "".join(files.values())
    assert json.loads(files["verdict.json"]) == {"state": "hang", "suspects": [1]}
    assert read_trace(rep.path / "trace.jsonl.gz")[0].processes[0].cmdline[-1] == "<redacted>"


def test_a_broken_or_absent_detector_is_a_note_not_a_lost_bundle(tmp_path, monkeypatch):
    snap = Snapshot(t=1.0, gpus=(GpuSample(index=0),))

    def broken(*_a, **_k):
        raise RuntimeError("detector bug")

    monkeypatch.setattr(bundle_mod, "detector_verdict", broken)
    rep = write_bundle(tmp_path / "b", snapshots=[snap], processes=[])
    assert any("detector failed (RuntimeError: detector bug)" in n for n in rep.notes)

    def absent(*_a, **_k):
        raise ImportError("no gputui.diagnose")

    monkeypatch.setattr(bundle_mod, "detector_verdict", absent)
    rep = write_bundle(tmp_path / "c", snapshots=[snap], processes=[])
    assert any("not in this build" in n for n in rep.notes)
    assert (rep.path / "README.txt").exists()


def test_loaded_cuda_nccl_and_torch_versions_are_read_from_the_process_maps(targets, tmp_path):
    """Real shared libraries under the file names CUDA, NCCL and torch wheels use."""
    lib = Path(_ctypes.__file__)
    site = tmp_path / "site-packages"
    nccl = site / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    (site / "nvidia_nccl_cu13-2.28.9.dist-info").mkdir(parents=True)
    cudart = tmp_path / "cuda" / "libcudart.so.13.0.96"
    torch_lib = site / "torch" / "lib" / "libtorch_python.so"
    for dest in (nccl, cudart, torch_lib):
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(lib, dest)
    (site / "torch" / "version.py").write_text("__version__ = '2.11.0+cu130'\n")
    loads = []
    for dest in (nccl, cudart, torch_lib):
        loads += ["--load", str(dest)]
    p = targets.start("loader", extra_args=tuple(loads))
    libs = process_libraries(p.pid)
    assert libs["nccl"] == {"path": str(nccl), "version": "2.28.9"}
    assert libs["cudart"]["version"] == "13.0.96"
    assert libs["torch"]["version"] == "2.11.0+cu130"
    assert "cuda_driver" not in libs
