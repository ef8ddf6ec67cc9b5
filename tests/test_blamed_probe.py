"""Probe what the verdict blames, on one key: which GPU a verdict blames, the pairs that run
(only the blamed GPU's), the refusal while ranks hold the GPUs, the result joined to the
verdict as a finding, and the key offered only when something is blamed.

Real parts: the probe's gloo workers (CPU processes standing in for GPUs, a fault injected
through GPUTUI_PROBE_FAULT), `gputui check` run as a person runs it against the stand-in
libnvidia-ml.so.1 (tests/nvml_standin: an Xid 79 on GPU 1, a rank process on a GPU), and
the dashboard replaying the real 2 x H200 hang with an Xid 79 added on GPU 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hangs import hang_window
from nvml_standin.build import REPO, build_standin, gputui_argv, standin_env
from screen import run_to_end
from textual.app import App
from textual.widgets import Static

from gputui.collect.model import ProcessInfo, RankInfo
from gputui.diagnose.health.blame import Blame, blamed
from gputui.diagnose.health.blamed_probe import (
    explain_blamed_probe,
    probe_findings,
    with_probe_findings,
)
from gputui.diagnose.ranking import Finding, Strength
from gputui.diagnose.verdict import Verdict
from gputui.probe.blamed import holders, refusal, refused_record
from gputui.probe.runner import torch_installed
from gputui.probe.schedule import rounds_with
from gputui.ui.app import GputuiApp
from gputui.ui.screens.probe import ProbeScreen

needs_torch = pytest.mark.skipif(not torch_installed(), reason="torch is not installed")
# 3 s: the stand-in's Xid event must reach the health tracker before the last sample on a
# busy machine (at 1.5 s it sometimes came after it, and nothing was blamed yet).
CHECK = ("check", "--json", "--duration", "3", "--interval", "0.25", "--timeout", "2")


def verdict(*found: Finding, state: str = "stalled") -> Verdict:
    ranked = (*found, Finding("GPU 0 spins", Strength.NVML, "nvml"))
    return Verdict(t=10.0, state=state, reason=found[0].lead if found else "", ranked=ranked)


def record(pairs: list[tuple[tuple[int, int], bool, float | None, str | None]], **kw) -> dict:
    rec = {
        "type": "blamed_probe",
        "t": 20.0,
        "job": "j",
        "gpu": 3,
        "link": None,
        "why": "x",
        "source": "verdict",
        "outcome": "done",
        "error": None,
        "held_by": [],
        "backend": "nccl",
    }
    rec["pairs"] = [{"pair": list(p), "ok": ok, "gbps": g, "reason": r} for p, ok, g, r in pairs]
    return {**rec, **kw}


# ---------------------------------------------------------------- what a verdict blames


def test_a_hardware_finding_on_one_gpu_is_blamed():
    f = Finding(
        "rank 3 (GPU 3) hit Xid 79: GPU fell off the bus; drain the node",
        Strength.HARDWARE,
        "health",
        ranks=(3,),
        gpus=(3,),
    )
    assert blamed(verdict(f)) == Blame(3, f.text, None, "verdict")


def test_a_link_whose_error_rate_stands_out_is_blamed_with_its_number():
    f = Finding(
        "rank 3 (GPU 3) link 7: NVLink CRC errors at 4,100/min against the node's 12/min",
        Strength.CONTEXT,
        "health",
        ranks=(3,),
        gpus=(3,),
    )
    b = blamed(verdict(Finding("rank 1 is in x (a.py:1)", Strength.CULPRIT_LINE, "stacks"), f))
    assert b is not None and (b.gpu, b.link, b.source) == (3, 7, "link")


def test_a_programs_xid_and_a_hang_without_hardware_blame_nothing():
    prog = Finding(
        "rank 1 died: CUDA error (Xid 31 on GPU 1)", Strength.RANK_GONE, "lastwords", gpus=(1,)
    )
    assert blamed(verdict(prog), sick={2: "GPU 2 is degraded"}) is None
    assert blamed(None) is None


def test_a_straggler_held_back_by_its_clocks_is_blamed_and_one_merely_slower_is_not():
    reason = (
        "job j is slow: rank 2 (GPU 2) holds it back. GPU 2's clocks are held back by "
        "hardware thermal slowdown: a slow GPU (cooling, power or the board)."
    )
    slow = Verdict(t=1.0, state="slow", reason=reason, stragglers=(2,), slow_why={"who": "x"})
    b = blamed(slow)
    assert b is not None and (b.gpu, b.source) == (2, "straggler")
    busy = replace(
        slow,
        reason="job j is slow: rank 2 (GPU 2) holds it back. GPU 2 against "
        "its waiting peers: 300 W vs 310 W, SM clock 1980 MHz vs 1980 MHz.",
    )
    assert blamed(busy) is None


def test_with_no_job_a_sick_gpu_is_blamed():
    ok = Verdict(t=1.0, state="ok", reason="no job")
    b = blamed(ok, sick={1: "GPU 1 is failed: Xid 79: GPU fell off the bus"})
    assert b == Blame(1, "GPU 1 is failed: Xid 79: GPU fell off the bus", None, "health")


# ---------------------------------------------------------------- the result, joined


def test_a_pair_far_below_the_others_is_hardware_named_with_the_link():
    rec = record(
        [((3, 0), True, 385.0, None), ((3, 1), True, 395.0, None), ((3, 5), True, 12.0, None)],
        link=7,
    )
    (f,) = probe_findings(rec)
    assert f.strength == Strength.HARDWARE and f.gpus == (3,)
    assert f.text == "GPU 3 ↔ GPU 5: 12 GB/s against 390 GB/s for the other pairs: link 7"


def test_a_failed_pair_is_hardware_and_all_failed_is_said_once():
    (f,) = probe_findings(record([((0, 3), True, 390.0, None), ((3, 4), False, None, "timed out")]))
    assert (f.strength, f.text) == (Strength.HARDWARE, "GPU 3 ↔ GPU 4: failed: timed out")
    both = record([((0, 3), False, None, "worker exited 3"), ((3, 4), False, None, "timed out")])
    assert [f.text for f in probe_findings(both)] == [
        "GPU 3: all its 2 pairs failed (worker exited 3)"
    ]


def test_pairs_alike_clear_the_gpu_and_gloo_speeds_are_not_judged():
    alike = record([((0, 3), True, 380.0, None), ((3, 4), True, 395.0, None)])
    (f,) = probe_findings(alike)
    assert f.strength == Strength.CONTEXT
    assert (
        f.text == "the pair probe of GPU 3: its 2 pairs passed at 380-395 GB/s, no pair stands out"
    )
    gloo = record([((0, 3), True, 15.0, None), ((3, 4), True, 3.0, None)], backend="gloo")
    (g,) = probe_findings(gloo)
    assert g.strength == Strength.CONTEXT and "speeds not judged on CPU stand-ins" in g.text


def test_the_probes_finding_joins_the_verdict_and_leads_when_it_confirms_the_hardware():
    xid = Finding(
        "rank 3 (GPU 3) hit Xid 74: NVLink error; reset the GPU",
        Strength.HARDWARE,
        "health",
        gpus=(3,),
    )
    culprit = Finding("rank 1 is in x (a.py:1)", Strength.CULPRIT_LINE, "stacks")
    v = verdict(xid, culprit)
    rec = record(
        [((3, 0), True, 385.0, None), ((3, 1), True, 395.0, None), ((3, 5), True, 12.0, None)]
    )
    joined = with_probe_findings(v, explain_blamed_probe(rec, v, None))
    assert [f.source for f in joined.ranked] == ["health", "blamed_probe", "stacks", "nvml"]
    assert joined.reason == xid.text  # the Xid still leads; the probe stands beside it
    assert joined.evidence["blamed_probe"]["pairs"][2]["gbps"] == 12.0


@pytest.mark.hostile
@pytest.mark.parametrize(
    "damage", [{"gpu": "3"}, {"outcome": "?"}, {"pairs": [{"pair": [1]}]}, {"pairs": "x"}]
)
def test_a_damaged_probe_record_is_one_context_finding(damage):
    ev = explain_blamed_probe({**record([((0, 3), True, 1.0, None)]), **damage}, None, None)
    assert [f.strength for f in ev.ranked] == [Strength.CONTEXT]
    assert ev.findings[0].startswith("the blamed GPU's probe record could not be read")


# ---------------------------------------------------------------- the pairs and the refusal


def test_only_the_blamed_gpus_pairs_are_scheduled_one_at_a_time():
    assert rounds_with([0, 1, 2, 3], 2) == [[(0, 2)], [(1, 2)], [(2, 3)]]
    with pytest.raises(ValueError):
        rounds_with([0, 1], 5)


def test_ranks_holding_the_gpus_refuse_the_probe_and_say_to_end_them_first():
    rank = ProcessInfo(812, cmdline=("python",), gpus=(2,), rank=RankInfo(rank=2))
    other = ProcessInfo(900, cmdline=("nvidia-persistenced",), gpus=())
    held = holders([rank, other], [0, 1, 2, 3])
    assert held == [rank]
    b = Blame(1, "GPU 1 is failed")
    text = refusal(b, held)
    assert text.startswith("the probe of GPU 1 is refused: rank (pid 812) hold the GPUs; end them")
    assert "X key" in text
    rec = refused_record(b, held, "job-1")
    (f,) = probe_findings(rec)
    assert f.strength == Strength.CONTEXT and f.text.startswith("the pair probe of GPU 1: refused")
    assert rec["held_by"] == [812]


# ---------------------------------------------------------------- the dashboard


def with_xid(source, gpu: int, xid: int):
    from gputui.collect.nvml.xid import XidEvent
    from gputui.collect.source import ReplaySource

    snaps = list(source.snaps)
    i = next(k for k, s in enumerate(snaps) if s.t - snaps[0].t >= 2.0)
    ev = XidEvent(snaps[i].t, xid, "nvml", gpu=gpu)
    rec = {"type": "health", "t": snaps[i].t, "started": snaps[0].t, "events": [ev.to_json()]}
    snaps[i] = replace(snaps[i], records=(rec,))
    return ReplaySource(snaps, name="test", realtime=False)


def keybar_text(app: GputuiApp) -> str:
    return "".join(seg.text for seg in app.keybar.build(120)[0])


async def test_b_is_offered_in_the_key_bar_only_while_a_gpu_is_blamed(demo_snaps):
    app = GputuiApp(with_xid(hang_window(demo_snaps), gpu=1, xid=79))
    async with app.run_test(size=(120, 30)) as pilot:
        await run_to_end(app, pilot)
        assert keybar_text(app).startswith(" B probe GPU 1 "), keybar_text(app)
        await pilot.press("B")  # a replay: its GPUs are not this machine's
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert any("gputui probe --pairs-with 1" in m for m in said), said
    plain = GputuiApp(hang_window(demo_snaps))
    async with plain.run_test(size=(120, 30)) as pilot:
        await run_to_end(plain, pilot)
        assert plain.verdict is not None and plain.verdict.alarm  # a hang, no hardware blamed
        assert "B probe" not in keybar_text(plain)


class HostApp(App[None]):
    def __init__(self, screen: ProbeScreen) -> None:
        super().__init__()
        self.probe = screen

    def on_mount(self) -> None:
        self.push_screen(self.probe)


@needs_torch
async def test_the_probe_screen_runs_only_the_blamed_gpus_pairs_and_joins_the_result(tmp_path):
    import time

    got: list[dict] = []
    screen = ProbeScreen(
        backend="gloo",
        cpu=3,
        save_dir=tmp_path,
        blame=Blame(1, "Xid 79"),
        job="job-1",
        on_record=got.append,
    )
    app = HostApp(screen)
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 120
        while not screen.finished.is_set():
            assert time.monotonic() < deadline, "the probe did not finish"
            await pilot.pause(0.05)
        await pilot.pause()
        assert screen.report is not None and screen.error is None
        assert [p.pair for p in screen.report.pairs] == [(0, 1), (1, 2)]
        shown = str(screen.query_one("#probe-blamed", Static).content)
        assert shown.startswith("\njoins the verdict: the pair probe of GPU 1: its 2 pairs passed")
    (rec,) = got
    assert rec["type"] == "blamed_probe" and rec["job"] == "job-1" and rec["gpu"] == 1


# ---------------------------------------------------------------- check --probe-blamed


def check(
    mode: str, *args: str, env: dict[str, str] | None = None, alone: bool = True
) -> subprocess.CompletedProcess:
    """`gputui check` on 3 stand-in GPUs; `alone`: in a PID namespace of its own (no other
    test's job beside it), False where it must see a process this test started."""
    e = {**standin_env(build_standin(), mode), "GPUTUI_STANDIN_GPUS": "3", **(env or {})}
    return subprocess.run(
        gputui_argv(*CHECK, *args, alone=alone),
        cwd=REPO,
        env=e,
        capture_output=True,
        text=True,
        timeout=180,
    )


@needs_torch
def test_check_probes_only_the_blamed_gpus_pairs_and_joins_a_failure_as_hardware():
    r = check(
        "xid:1:79",
        "--probe-blamed",
        "--probe-backend",
        "gloo",
        "--probe-timeout",
        "60",
        env={"GPUTUI_PROBE_FAULT": "exit:1-2"},
    )
    assert r.returncode == 3, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    probe = last["blamed_probe"]
    assert (probe["gpu"], probe["source"], probe["outcome"]) == (1, "health", "done")
    assert [p["pair"] for p in probe["pairs"]] == [[0, 1], [1, 2]]  # never 0-2
    assert last["ranked"][0]["strength"] == "hardware"
    assert last["reason"].startswith("GPU 1 ↔ GPU 2: failed: worker exited 3")


def test_check_refuses_the_probe_while_a_rank_holds_a_gpu(spawn):
    rank = spawn(env={"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"})
    r = check(
        "",
        "--probe-blamed",
        "--blame-gpu",
        "1",
        "--probe-backend",
        "gloo",
        env={"GPUTUI_STANDIN_PIDS": f"0,{rank.pid}"},
        alone=False,
    )
    last = json.loads(r.stdout.splitlines()[-1])
    probe = last["blamed_probe"]
    assert probe["outcome"] == "refused" and probe["held_by"] == [rank.pid] and probe["pairs"] == []
    assert f"(pid {rank.pid}) hold the GPUs; end them first" in probe["error"]


def test_check_says_when_nothing_is_blamed_and_a_replay_is_not_probed(tmp_path):
    r = check("", "--probe-blamed")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1])["blamed_probe"] == {"outcome": "nothing blamed"}
    demo = subprocess.run(
        [sys.executable, "-m", "gputui", "check", "--demo", "--probe-blamed", "--blame-gpu", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "--probe-blamed: GPU 1 is not probed: a replay" in demo.stdout, demo.stdout


def test_probe_pairs_with_rejects_a_gpu_that_is_not_probed():
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputui",
            "probe",
            "--backend",
            "gloo",
            "--cpu",
            "3",
            "--pairs-with",
            "5",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if not torch_installed():
        pytest.skip("torch is not installed")
    assert r.returncode == 2 and "--pairs-with 5: not among the devices probed" in r.stderr
    assert Path(REPO).is_dir()
