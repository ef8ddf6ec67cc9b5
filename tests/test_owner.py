"""Whose process is it: pods, containers and Slurm jobs named from /proc/PID/cgroup.

The paths below are the forms the kubelet (cgroupfs and systemd drivers), Docker, containerd,
CRI-O and Slurm (cgroup v1 and v2) create. The last tests put real processes into real cgroups
named that way (as root, where this machine lets a test make cgroups) and read them back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from gputui.collect.procs.owner import Owner, owner_from_cgroup, read_owner
from gputui.collect.procs.reader import ProcessReader

UID = "3f9c1d2e-1234-4abc-9def-0123456789ab"
CID = "a" * 64


def test_a_pod_under_the_kubelets_cgroupfs_driver():
    o = owner_from_cgroup(f"11:pids:/kubepods/burstable/pod{UID}/{CID}\n0::/\n")
    assert o == Owner("pod", pod_uid=UID, qos="burstable", container_id=CID)


def test_a_guaranteed_pod_has_no_qos_segment():
    o = owner_from_cgroup(f"4:memory:/kubepods/pod{UID}/{CID}")
    assert o is not None and o.qos == "guaranteed" and o.pod_uid == UID


def test_a_pod_under_the_systemd_driver_gets_its_uid_back_in_dashed_form():
    under = UID.replace("-", "_")
    path = (
        f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{under}.slice/"
        f"cri-containerd-{CID}.scope"
    )
    o = owner_from_cgroup(f"0::{path}\n")
    assert o == Owner("pod", pod_uid=UID, qos="besteffort", container_id=CID)


@pytest.mark.parametrize("runtime", ["crio", "docker"])
def test_a_pod_under_crio_or_docker_scopes(runtime):
    under = UID.replace("-", "_")
    path = f"/kubepods.slice/kubepods-pod{under}.slice/{runtime}-{CID}.scope"
    o = owner_from_cgroup(f"0::{path}")
    assert o is not None and o.kind == "pod" and o.container_id == CID


def test_docker_containers_in_both_forms():
    assert owner_from_cgroup(f"12:cpu:/docker/{CID}") == Owner("docker", container_id=CID)
    assert owner_from_cgroup(f"0::/system.slice/docker-{CID}.scope") == Owner(
        "docker", container_id=CID
    )


def test_slurm_jobs_under_cgroup_v1_and_v2():
    v1 = owner_from_cgroup("4:memory:/slurm/uid_1000/job_4242/step_0/task_1\n0::/\n")
    assert v1 == Owner("slurm", slurm_job="4242", slurm_step="0", slurm_uid=1000)
    v2 = owner_from_cgroup("0::/system.slice/slurmstepd.scope/job_77/step_batch/user/task_0")
    assert v2 is not None and (v2.slurm_job, v2.slurm_step) == ("77", "batch")
    assert v2.short() == "slurm 77.batch"


def test_on_a_hybrid_host_the_line_that_names_most_wins():
    text = (
        f"9:name=systemd:/kubepods/burstable/pod{UID}\n"
        f"4:memory:/kubepods/burstable/pod{UID}/{CID}\n0::/\n"
    )
    o = owner_from_cgroup(text)
    assert o is not None and o.container_id == CID


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "0::/user.slice/user-0.slice/session-1.scope",
        "1:cpu:relative/path",
        "x" * 100_000,
        "0::/kubepods/burstable/podNOT-A-UID/abc",
        "\x00\x1b[31m::/docker/",
    ],
)
def test_lines_of_unknown_shape_name_no_owner(text):
    assert owner_from_cgroup(text) is None


def test_short_names_for_a_table_cell():
    pod = Owner("pod", pod_uid=UID, pod_name="train-7f9c-worker-1", namespace="ml")
    assert pod.short() == "pod ml/train-7f9c-worker-1"
    assert Owner("pod", pod_uid=UID).short() == "pod 3f9c1d2e"
    assert Owner("docker", container_id=CID).short() == "docker aaaaaaaaaaaa"
    assert pod.to_json() == {
        "kind": "pod",
        "pod_uid": UID,
        "pod": "train-7f9c-worker-1",
        "namespace": "ml",
    }


# ---------------------------------------------------------------- real cgroups

CGROOT = Path("/sys/fs/cgroup")


def _cgroup_dir(rel: str) -> Path | None:
    """A real cgroup at `rel` under a v1 controller or the v2 hierarchy we can write, or None."""
    for base in (CGROOT / "pids", CGROOT / "unified", CGROOT):
        if (base / "cgroup.procs").exists():
            d = base / rel
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError:
                continue
            if (d / "cgroup.procs").exists():
                return d
    return None


@pytest.fixture
def in_cgroup():
    """Start a sleeping process inside a real cgroup at a given path; clean both up."""
    made: list[tuple[subprocess.Popen, Path, Path]] = []

    def start(rel: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        if os.geteuid() != 0:
            pytest.skip("making cgroups needs root")
        d = _cgroup_dir(rel)
        if d is None:
            pytest.skip("this machine does not let a test make cgroups")
        p = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"],
            stdin=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        (d / "cgroup.procs").write_text(str(p.pid))
        made.append((p, d, d.parents[len(Path(rel).parts) - 1]))
        return p

    yield start
    for p, d, top in made:
        p.kill()
        p.wait(timeout=10)
        for sub in [d, *d.parents]:
            try:
                sub.rmdir()
            except OSError:
                pass
            if sub == top:
                break


def test_a_real_process_in_a_kubelet_named_cgroup_is_named_with_its_pod(in_cgroup):
    uid = str(uuid.uuid4())
    p = in_cgroup(
        f"kubepods/burstable/pod{uid}/{CID}",
        env={"HOSTNAME": "train-7f9c-worker-1", "POD_NAMESPACE": "ml"},
    )
    o = read_owner(p.pid, {"HOSTNAME": "train-7f9c-worker-1", "POD_NAMESPACE": "ml"})
    assert o is not None and o.pod_uid == uid and o.container_id == CID
    assert o.short() == "pod ml/train-7f9c-worker-1"
    # ...and the process reader, which every face uses, carries it on the process.
    (info,) = ProcessReader().read({p.pid: ((0,), 100.0)})
    assert info.owner is not None and info.owner.pod_uid == uid
    assert info.owner.pod_name == "train-7f9c-worker-1"


def test_a_real_process_in_a_slurm_named_cgroup_is_named_with_its_job(in_cgroup):
    job = str(900000 + os.getpid() % 1000)
    p = in_cgroup(f"slurm/uid_0/job_{job}/step_0")
    (info,) = ProcessReader().read({p.pid: ((), None)})
    assert info.owner == Owner("slurm", slurm_job=job, slurm_step="0", slurm_uid=0)


def test_a_process_of_no_container_has_no_owner():
    assert read_owner(os.getpid()) is None or read_owner(os.getpid()).kind != "pod"
    assert read_owner(2**22 + 7) is None  # no such process: None, not an error


# ---------------------------------------------------------------- every face


def _owned(snaps, owner: Owner):
    from dataclasses import replace

    for s in snaps:
        yield replace(s, processes=tuple(replace(p, owner=owner) for p in s.processes))


def test_the_verdict_names_the_suspects_pod():
    from gputui.diagnose.hang.detector import diagnose_trace
    from tests.synth import timeline

    pod = Owner("pod", pod_uid=UID, pod_name="train-7f9c-worker-1", namespace="ml")
    snaps = _owned(timeline((15.0, ["spin", "idle"])), pod)
    last = diagnose_trace(snaps)[-1]
    assert last.state == "stalled" and last.suspects == (1,)
    assert "GPU 1 (pod ml/train-7f9c-worker-1, pid" in last.reason


def test_the_owner_is_recorded_and_replayed_and_printed_by_snapshot(tmp_path):
    from gputui.collect.trace.format import snapshot_to_lines
    from gputui.collect.trace.read import read_trace
    from gputui.commands.snapshot import snapshot_to_json, snapshot_to_text
    from gputui.jsonout import dumps
    from tests.synth import snapshot

    pod = Owner("pod", pod_uid=UID, pod_name="train-0", container_id=CID)
    (snap,) = _owned([snapshot(1000.0, ["spin", "idle"])], pod)
    f = tmp_path / "rec.jsonl"
    f.write_text("".join(dumps(line) + "\n" for line in snapshot_to_lines(snap)))
    (back,) = read_trace(f)
    assert [p.owner for p in back.processes] == [pod, pod]
    d = snapshot_to_json(back)
    assert d["processes"][0]["owner"]["pod"] == "train-0"
    assert "[pod train-0] python train.py" in snapshot_to_text(back)


def test_a_recorded_owner_of_unknown_shape_is_dropped_not_an_error():
    from gputui.collect.procs.owner import owner_from_json

    assert owner_from_json({"kind": "vm", "pod": "x"}) is None
    assert owner_from_json("pod") is None
    o = owner_from_json({"kind": "pod", "pod": "a\x1b[2Jb", "pod_uid": "u" * 500})
    assert o is not None and o.pod_name is None and len(o.pod_uid) == 128


def test_the_process_table_shows_and_filters_by_the_owner():
    from gputui.collect.model import ProcessInfo
    from gputui.ui.widgets.rows import cells, matches

    p = ProcessInfo(pid=815, cmdline=("python3", "train.py"), owner=Owner("slurm", slurm_job="42"))
    assert cells(p, None, 0.0, wide=True)["command"] == "[slurm 42] python3 train.py"
    assert matches(p, "slurm 42") and not matches(p, "slurm 43")
    moved = ProcessInfo(pid=3, cmdline=("python3", "train.py"), nvml_pid=4242, pid_guess=True)
    assert cells(moved, None, 0.0, wide=True)["command"].endswith(
        "(NVML pid 4242, matched by guess)"
    )
