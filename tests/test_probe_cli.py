"""`gputui probe` as a user runs it: exit 0 when every pair passes, 1 when one fails, 2 with
one line for input it cannot work with (including no torch and, for nccl, no GPUs)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO, no_gpu_only, run_cli

from gputui.probe.runner import torch_installed

needs_torch = pytest.mark.skipif(not torch_installed(), reason="torch is not installed")


@needs_torch
def test_all_pairs_pass_exit_0_json_schema_and_out_file(tmp_path):
    out = tmp_path / "probe.json"
    r = run_cli("probe", "--backend", "gloo", "--cpu", "2", "--json", "--out", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["devices"] == [0, 1] and data["backend"] == "gloo"
    assert data["ok"] is True and data["failures"] == []
    assert [(c["src"], c["dst"]) for c in data["copy"]] == [(0, 1), (1, 0)]
    for c in data["copy"]:
        assert set(c) == {"src", "dst", "gbps", "bytes", "ok"}
        assert c["ok"] and c["gbps"] > 0 and c["bytes"] == 8 * 2**20
    (ar,) = data["allreduce"]
    assert ar["pair"] == [0, 1] and ar["ok"] and ar["busbw_gbps"] > 0 and ar["latency_us"] > 0
    assert data["topology"] == []  # simulated devices have none
    assert data["wall_s"] > 0 and data["worst"]["kind"] == "link"
    assert json.loads(out.read_text()) == data


@needs_torch
def test_a_failing_pair_exits_1_with_the_matrix_and_the_reason():
    r = run_cli("probe", "--cpu", "2", "--size", "1M", env={"GPUTUI_PROBE_FAULT": "corrupt:0-1"})
    assert r.returncode == 1, r.stderr
    assert "src\\dst  dev0  dev1" in r.stdout
    assert "FAIL" in r.stdout
    assert "0-1: data check failed: " in r.stdout
    assert "1 of 1048576 bytes differ" in r.stdout
    assert "link 0-1 failed" in r.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--cpu", "1"], "a pair needs at least 2 devices"),
        (["--cpu", "3", "--gpus", "0,x"], "expected GPU indices"),
        (["--cpu", "3", "--gpus", "0,0"], "distinct"),
        (["--cpu", "3", "--gpus", "0,7"], "no such device 7"),
        (["--cpu", "3", "--gpus", "1"], "at least 2 devices"),
        (["--cpu", "2", "--size", "0"], "more than 0 bytes"),
        (["--cpu", "2", "--size", "lots"], "not a size"),
        (["--cpu", "2", "--timeout", "-1"], "positive"),
        (["--backend", "nccl", "--cpu", "2"], "--cpu only applies with --backend gloo"),
    ],
)
@needs_torch
def test_bad_input_is_one_line_and_exit_2(args, says):
    r = run_cli("probe", *args)
    assert r.returncode == 2
    assert r.stdout == ""
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@no_gpu_only
@needs_torch
def test_nccl_without_gpus_suggests_the_gloo_backend():
    r = run_cli("probe", "--json")
    assert r.returncode == 2
    assert "--backend gloo --cpu" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_without_torch_it_says_how_to_install_it_and_exits_2():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from gputui.cli import main\n"
        "sys.exit(main(['probe', '--backend', 'gloo', '--cpu', '2']))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert r.returncode == 2
    assert r.stderr.strip() == "gputui: the probe needs torch: pip install 'gputui[probe]'"


def test_the_rest_of_gputui_never_imports_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import gputui.cli, gputui.commands.probe, gputui.probe.runner, gputui.ui.screens.probe\n"
        "gputui.cli.build_parser()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert r.returncode == 0, r.stderr
