"""`merge --probe-blamed`: the real world probe over the blamed host and its neighbours.

Four "hosts" reported a stall and host c a sick GPU (an Xid 79 cannot be caused on a CPU box:
the check lines say it, as a node's `check --json` would). The verdict blames c and offers the
world probe over c and its neighbours d and b; `--probe-blamed` runs it with the `local`
launcher (every host is this machine, gloo on CPU), and:

- with c's rank killed after joining (GPUTUI_WORLD_FAULT), the bisect names c broken, the
  answer leads the verdict's findings, the next step is to drain c, and no worker is left;
- with the stand-in NVML showing a job's rank on the GPU, every host refuses before torch is
  imported, and the verdict says to end the job's ranks first.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from test_world_probe import _free_port

pytest.importorskip("torch")

T = 1_795_338_000.0
JOB = "master:10.0.0.1:29500"
XID79 = {"gpus": {"1": {"health": "failed", "reason": "Xid 79: GPU has fallen off the bus"}}}


@pytest.fixture
def checks(tmp_path) -> str:
    base = {"t": T, "state": "stalled", "job_key": JOB, "world_size": 4, "since": T - 20}
    lines = [{**base, "host": h, "spinning": [0], "ranks": {"0": i}} for i, h in enumerate("abd")]
    lines.append({**base, "host": "c", "spinning": [0], "ranks": {"0": 3}, "health": XID79})
    f = tmp_path / "checks.jsonl"
    f.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return str(f)


def _merge(checks: str, env: dict[str, str] | None = None):
    port = str(_free_port(12))
    args = ["merge", checks, "--expect", "a,b,c,d", "--json", "--probe-blamed"]
    args += ["--probe-launcher", "local", "--probe-port", port, "--probe-timeout", "40"]
    r = run_cli(*args, env=env, timeout=180)
    assert "Traceback" not in r.stderr, r.stderr
    return r, json.loads(r.stdout.splitlines()[-1])


def test_a_broken_blamed_host_is_named_by_the_bisect_and_joins_the_verdict(checks):
    import os

    r, last = _merge(checks, {**os.environ, "GPUTUI_WORLD_FAULT": "c:kill"})
    assert r.returncode == 1, r.stderr  # the hang seen is the worst verdict
    rec = last["blamed_host_probe"]
    assert rec["hosts"] == ["c", "d", "b"] and rec["outcome"] == "done"
    assert list(rec["bad_hosts"]) == ["c"], rec  # d and b passed alone and together
    assert rec["bad_pairs"] == [] and rec["leftovers"] == {}
    assert last["findings"][0].startswith("world probe over c, d, b: host c is broken")
    assert any("state=drain" in s for s in last["next_steps"])
    assert not any("--bisect" in s for s in last["next_steps"])


def test_a_blamed_host_whose_gpu_a_job_holds_is_refused_naming_the_job(checks, spawn):
    from nvml_standin.build import build_standin, standin_env

    job = spawn(env={"SLURM_JOB_ID": "4242", "RANK": "3"})
    r, last = _merge(checks, standin_env(build_standin(), f"busy_pid:{job.pid}"))
    assert r.returncode == 1, r.stderr
    rec = last["blamed_host_probe"]
    assert rec["outcome"] == "refused" and rec["bad_hosts"] == {}, rec
    said = last["findings"][0]
    assert said.startswith("the world probe of c is refused:")
    assert f"pid {job.pid}" in said and "Slurm job 4242 rank 3" in said
    assert "End the job's ranks there first" in said
