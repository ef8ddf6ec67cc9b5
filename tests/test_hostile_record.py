"""`gputui record` and the files it will not write: links, FIFOs, sockets, a full disk.

Recording needs NVML. This box has no GPU, so the tests build a small stand-in
`libnvidia-ml.so.1` (two healthy GPUs, the handful of calls `record` needs; every other
call is missing, which NVML's Python binding reports as "function not found", i.e. N/A)
and put it on LD_LIBRARY_PATH: the real binding and the real command run against it. A
full disk is caused honestly: `/dev/full` (ENOSPC) and RLIMIT_FSIZE (EFBIG mid-recording).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import socket
import subprocess
import sys

import pytest
from conftest import REPO, run_cli

from gputui.collect.trace.format import read_trace

pytestmark = pytest.mark.hostile

STANDIN_C = r"""
#include <stdio.h>
typedef int ret_t;
typedef struct { unsigned int gpu, memory; } util_t;
static int devs[2];
ret_t nvmlInitWithFlags(unsigned int flags) { return 0; }
ret_t nvmlInit_v2(void) { return 0; }
ret_t nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(ret_t r) { return "Not Supported"; }
ret_t nvmlSystemGetDriverVersion(char *v, unsigned int n) { snprintf(v, n, "999.99"); return 0; }
ret_t nvmlDeviceGetCount_v2(unsigned int *c) { *c = 2; return 0; }
ret_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) {
    if (i >= 2) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *h = &devs[i];
    return 0;
}
ret_t nvmlDeviceGetName(void *h, char *n, unsigned int l) {
    snprintf(n, l, "Stand-in GPU");
    return 0;
}
ret_t nvmlDeviceGetUUID(void *h, char *u, unsigned int l) {
    snprintf(u, l, "GPU-standin-%d", (int)((int *)h - devs));
    return 0;
}
ret_t nvmlDeviceGetUtilizationRates(void *h, util_t *u) { u->gpu = 98; u->memory = 23; return 0; }
ret_t nvmlDeviceGetPowerUsage(void *h, unsigned int *p) { *p = 690000; return 0; }
ret_t nvmlDeviceGetEnforcedPowerLimit(void *h, unsigned int *p) { *p = 700000; return 0; }
ret_t nvmlDeviceGetComputeRunningProcesses_v3(void *h, unsigned int *n, void *infos) {
    *n = 0;
    return 0;
}
"""


@pytest.fixture(scope="module")
def nvml_env(tmp_path_factory) -> dict[str, str]:
    """Environment that makes gputui load the stand-in NVML library."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in NVML library")
    d = tmp_path_factory.mktemp("nvml")
    (d / "standin.c").write_text(STANDIN_C)
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(d / "libnvidia-ml.so.1"), str(d / "standin.c")],
        check=True,
        timeout=60,
    )
    return {"LD_LIBRARY_PATH": str(d)}


def one_line_error(r) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("gputui: ")
    return last


def test_the_stand_in_library_records_two_gpus_with_a_meta_line(tmp_path, nvml_env):
    f = tmp_path / "r.jsonl"
    r = run_cli("record", str(f), "--interval", "0.1", "--duration", "0.5", env=nvml_env)
    assert r.returncode == 0, r.stderr
    first = f.read_text().splitlines()[0]
    assert first.startswith('{"type":"meta"') and '"interval":0.1' in first
    snaps = read_trace(f)
    assert len(snaps) >= 2 and all(len(s.gpus) == 2 for s in snaps)
    assert snaps[0].hostname == socket.gethostname()
    assert snaps[0].gpus[0].name == "Stand-in GPU"


@pytest.mark.parametrize("dangling", [True, False], ids=["dangling", "to-a-file"])
def test_record_refuses_a_symlink_even_with_force(tmp_path, dangling):
    target = tmp_path / "target.jsonl"
    if not dangling:
        target.write_text("keep me\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    for extra in ([], ["--force"]):
        err = one_line_error(run_cli("record", str(link), *extra))
        assert "symbolic link" in err
    assert not dangling or not target.exists()  # nothing created through the link
    assert dangling or target.read_text() == "keep me\n"


def test_record_refuses_fifos_sockets_directories(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "sock"))
    s.close()
    (tmp_path / "dir").mkdir()
    for name, words in (("fifo", "FIFO"), ("sock", "socket"), ("dir", "directory")):
        err = one_line_error(run_cli("record", str(tmp_path / name), "--force", timeout=30))
        assert words in err, err


def test_record_never_overwrites_without_force(tmp_path):
    f = tmp_path / "saved.jsonl"
    f.write_text("saved\n")
    assert "exists" in one_line_error(run_cli("record", str(f)))
    assert f.read_text() == "saved\n"


def test_a_full_device_is_one_line_and_exit_2(nvml_env):
    r = run_cli("record", "/dev/full", "--force", "--duration", "2", env=nvml_env, timeout=30)
    assert "/dev/full" in one_line_error(r) and "No space left on device" in r.stderr


def _file_size_limit(limit: int):
    def apply() -> None:  # in the child: writes past `limit` fail with EFBIG, not a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    return apply


@pytest.mark.parametrize("name", ["full.jsonl", "full.jsonl.gz"])
def test_a_disk_that_fills_up_keeps_every_complete_sample_and_nothing_partial(
    tmp_path, nvml_env, name
):
    f = tmp_path / name
    limit = 1500 if name.endswith(".gz") else 4000  # a few dozen samples either way
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputui",
            "record",
            str(f),
            "--interval",
            "0.05",
            "--duration",
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=REPO,
        env={**os.environ, **nvml_env},
        preexec_fn=_file_size_limit(limit),  # the test process forks once here
    )
    err = one_line_error(r)
    assert "File too large" in err and "kept the" in err
    kept = int(err.split("kept the ")[1].split()[0])
    assert kept >= 1
    assert f.stat().st_size <= limit
    snaps = read_trace(f)
    assert len(snaps) == kept  # exactly the samples it reported, each whole
    assert all(len(s.gpus) == 2 for s in snaps)
    if not name.endswith(".gz"):
        assert f.read_bytes().endswith(b"\n")  # cut back to the end of the last sample
