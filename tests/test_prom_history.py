"""`gputui check --prometheus` against a real Prometheus holding a cluster's GPU history.

One server for the whole module (tests/prom_history.py): a 30-minute window, a few hours
ago, of dcgm-exporter series for four nodes of four H200s each, backfilled with promtool:

- `ml/train-a` (PyTorchJob: pod train-a-master-0 on node-0, train-a-worker-0 on node-1)
  trains until T0+600 s; then node-1 GPU 2 goes idle (util 0, ~120 W: its rank stuck on
  the CPU side) while its seven peers spin in the collective (util 100 %, no memory
  traffic, ~123 W of 700 W): the H200 signature of an NCCL hang.
- `ml/infer` (StatefulSet infer-0 and infer-1 on node-2) trains the whole window: healthy,
  never blamed. Its GPU 1's uncorrectable-ECC counter drops from 4 to 0 at T0+900 (a driver
  reload: a counter reset, not errors); its GPU 3 reports Xid 79 (fell off the bus) at
  T0+1200.
- `research/sweep` (pod sweep-worker-0, all of node-3) trains until node-3 leaves the scrape
  after its sample at T0+1185; node-3 GPU 0 had a program's Xid 13 at T0+300.
- `ml/train-b` (pods train-b-worker-0 on node-5, train-b-worker-1 on node-6) trains until
  node-6 leaves the scrape after its sample at T0+1005 (the node died); from then node-5's
  GPUs spin, waiting for the ranks that were on node-6.
- `ml/ft` (pod ft-worker-0, all of node-4) progresses, but its GPU 0 computes (util 99,
  memory 23 %, 690 W) while GPUs 1-3 wait for it in every step (util 99, memory 8 %, 320
  W: the waiting ranks' levels on 4 x H200): slow, with GPU 0 its straggler.
- Node gx-0 is scraped by gputui's own exporter (other metric names, no pods): from T0+900
  its GPUs 0, 2, 3 spin while GPU 1 idles with its process alive; GPU 4 has no process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import REPO
from prom_history import (
    MISSING,
    SPIN,
    STUCK,
    TRAIN,
    Gpu,
    HistoryServer,
    check,
    grid,
    lines,
    one_line_error,
    write_openmetrics,
)

from gputui.collect.prom.timespec import iso

if MISSING and os.environ.get("CI"):
    pytest.fail(f"CI must install {' and '.join(MISSING)} (.ci/run does)", pytrace=False)
pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"{' and '.join(MISSING)} not installed (apt-get install prometheus; CI has it)",
)

STEP = 15.0
T0 = (time.time() // 3600) * 3600 - 4 * 3600  # a window a few hours ago: whole hours
T1 = T0 + 1800
HANG_AT = T0 + 600


def train_a(host: str, index: int):
    def read(t: float) -> dict[str, float]:
        if t < HANG_AT:
            return TRAIN
        return STUCK if (host, index) == ("node-1", 2) else SPIN

    return read


def infer(index: int):
    def read(t: float) -> dict[str, float]:
        r = dict(TRAIN)
        if index == 1:
            r["ecc_dbe"] = 4.0 if t < T0 + 900 else 0.0
        if index == 3:
            r["xid"] = 79.0 if t >= T0 + 1200 else 0.0
        return r

    return read


def sweep(index: int):
    def read(t: float) -> dict[str, float] | None:
        if t >= T0 + 1190:
            return None  # node-3 is not scraped any more
        return {**TRAIN, "xid": 13.0 if index == 0 and t >= T0 + 300 else 0.0}

    return read


def train_b(host: str):
    def read(t: float) -> dict[str, float] | None:
        if t < T0 + 1010:
            return TRAIN
        return SPIN if host == "node-5" else None

    return read


def ft(index: int):
    def read(t: float) -> dict[str, float]:
        return TRAIN if index == 0 else {"util": 99, "mem": 8, "power": 320.0}

    return read


def gx(index: int):
    def read(t: float) -> dict[str, float]:
        if index == 4:  # no process on it the whole window: free, never a suspect
            return {"util": 0, "mem": 0, "power": 78.0, "procs": 0}
        if t < T0 + 900:
            return TRAIN
        return STUCK if index == 1 else SPIN

    return read


def scenario() -> list[Gpu]:
    gpus = [Gpu("node-0", i, "train-a-master-0", "ml", train_a("node-0", i)) for i in range(4)]
    gpus += [Gpu("node-1", i, "train-a-worker-0", "ml", train_a("node-1", i)) for i in range(4)]
    gpus += [Gpu("node-2", i, f"infer-{i // 2}", "ml", infer(i)) for i in range(4)]
    gpus += [Gpu("node-3", i, "sweep-worker-0", "research", sweep(i)) for i in range(4)]
    gpus += [Gpu("node-4", i, "ft-worker-0", "ml", ft(i)) for i in range(4)]
    gpus += [Gpu("node-5", i, "train-b-worker-0", "ml", train_b("node-5")) for i in range(4)]
    gpus += [Gpu("node-6", i, "train-b-worker-1", "ml", train_b("node-6")) for i in range(4)]
    gpus += [Gpu("gx-0", i, None, None, gx(i), style="gputui") for i in range(5)]
    return gpus


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("prom-history")
    om = tmp / "dcgm.om"
    assert write_openmetrics(om, scenario(), grid(T0, T1, STEP, jitter=0.25)) > 10_000
    server = HistoryServer(tmp, om)
    yield server
    server.stop()


def window(prom: HistoryServer, *more: str) -> list[str]:
    return ["--prometheus", prom.url, "--from", str(T0), "--to", iso(T1), *more]


# ---------------------------------------------------------------- the verdicts


@pytest.fixture(scope="module")
def cluster(prom) -> subprocess.CompletedProcess:
    """`check --prometheus --json` over the whole window, run once for the tests that read it."""
    return check(*window(prom, "--json"))


@pytest.fixture(scope="module")
def node2(prom) -> subprocess.CompletedProcess:
    """...and over node-2 alone (the healthy job with the Xid and the counter reset)."""
    return check(*window(prom, "--nodes", "node-2", "--json"))


def test_the_hung_job_names_its_onset_and_the_gpu_that_went_idle_while_its_peers_spun(cluster):
    r = cluster
    assert r.returncode == 1, r.stderr  # a hang, worse than the sick GPU also in the window
    out = lines(r)
    verdicts = [o for o in out if o["kind"] == "verdict" and o["job"] == "ml/train-a"]
    stalled, hung = verdicts[0], verdicts[1]
    # The first sample that spun is the onset; stalled one step later (15 s >= 10 s),
    # hung once it has spun for 60 s.
    # Each stamped with the scrape's own time (0.25 s after the step: the scraper's offset).
    assert stalled["state"] == "stalled" and stalled["since"] == pytest.approx(HANG_AT + 0.25)
    assert stalled["t"] == pytest.approx(HANG_AT + STEP + 0.25)
    assert hung["state"] == "hung" and hung["t"] == pytest.approx(HANG_AT + 60.25)
    assert stalled["time"] == iso(HANG_AT + STEP)
    suspect = stalled["suspects"]
    assert [(s["host"], s["gpu"], s["pod"], s["state"]) for s in suspect] == [
        ("node-1", "2", "train-a-worker-0", "idle")
    ]
    assert suspect[0]["namespace"] == "ml" and suspect[0]["uuid"].startswith("GPU-")
    assert len(stalled["spinning"]) == 7
    summary = out[-1]
    assert summary["kind"] == "summary" and summary["exit"] == 1
    job = {j["job"]: j for j in summary["jobs"]}
    assert job["ml/train-a"]["state"] == "hung"
    assert job["ml/train-a"]["onset"] == pytest.approx(HANG_AT + 0.25)


def test_healthy_jobs_are_said_healthy_and_never_blamed(cluster):
    out = lines(cluster)
    summary = out[-1]
    assert set(summary["healthy"]) >= {"ml/infer", "research/sweep"}
    blamed = {(s["host"], s["gpu"]) for o in out if o["kind"] == "verdict" for s in o["suspects"]}
    assert {host for host, _ in blamed} == {"node-1", "node-6"}, blamed
    assert {o["job"] for o in out if o["kind"] == "verdict"} == {"ml/train-a", "ml/train-b"}


def test_a_straggler_over_the_window_makes_its_job_slow_not_hung(prom):
    r = check(*window(prom, "--nodes", "node-4", "--json"))
    assert r.returncode == 0, r.stdout + r.stderr  # slow is no alarm...
    out = lines(r)
    (slow,) = [o for o in out if o["kind"] == "slow"]
    assert slow["job"] == "ml/ft" and slow["stragglers"] == ["node-4:0"]
    assert "ml/ft" not in out[-1]["healthy"]
    r = check(*window(prom, "--nodes", "node-4", "--fail-on-slow"))
    assert r.returncode == 4, r.stdout + r.stderr  # ...unless asked
    assert "SLOW     job ml/ft: straggler node-4:0 waits in 0% of its busy samples" in r.stdout


def test_the_text_output_stamps_each_line_with_the_samples_time(prom):
    r = check(*window(prom))
    assert r.returncode == 1, r.stderr
    text = r.stdout
    assert f"{iso(HANG_AT + STEP)}  STALLED  job ml/train-a:" in text
    assert "node-1 GPU 2 (pod ml/train-a-worker-0) idle with its process alive" in text
    assert f"since {iso(HANG_AT)}, 15 s" in text
    assert "healthy: ml/infer (4 GPU(s) on 1 node(s)): never stalled, never blamed" in text
    assert "HUNG: ml/train-a (8 GPU(s) on 2 node(s)): onset " + iso(HANG_AT) in text
    final = text.splitlines()[-1]
    assert (
        final
        == "final: hang in ml/train-a, ml/train-b; sick GPU: node-2 GPU 3 (Xid 79); slow: ml/ft"
    )


def test_an_xid_is_joined_to_its_gpu_and_pod_and_a_hardware_xid_is_a_sick_gpu(node2):
    r = node2
    assert r.returncode == 3, r.stdout + r.stderr  # Xid 79 and no hang on node-2
    xids = [o for o in lines(r) if o["kind"] == "xid"]
    assert [(x["gpu"], x["pod"], x["xid"], x["fault"]) for x in xids] == [
        ("3", "infer-1", 79, "hardware")
    ]
    assert xids[0]["t"] == pytest.approx(T0 + 1200.25)


def test_a_programs_xid_is_told_but_not_a_sick_gpu(prom):
    r = check(*window(prom, "--match", 'namespace="research"', "--json"))
    assert r.returncode == 0, r.stdout + r.stderr
    (x,) = [o for o in lines(r) if o["kind"] == "xid"]
    assert (x["host"], x["gpu"], x["xid"], x["fault"]) == ("node-3", "0", 13, "program")


def test_a_counter_reset_is_said_and_not_counted_as_errors(node2):
    out = lines(node2)
    (reset,) = [o for o in out if o["kind"] == "counter_reset"]
    assert (reset["gpu"], reset["counter"]) == ("1", "ecc_dbe")
    assert reset["t"] == pytest.approx(T0 + 900.25)
    assert not [o for o in out if o["kind"] == "errors"]


def test_a_node_missing_from_the_scrape_is_said_as_such(cluster):
    gone = {o["host"]: o for o in lines(cluster) if o["kind"] == "node_missing"}
    assert set(gone) == {"node-3", "node-6"}
    assert gone["node-3"]["to"] is None
    assert gone["node-3"]["last_sample"] == pytest.approx(T0 + 1185.25)


def test_a_job_whose_node_left_the_scrape_blames_that_nodes_gpus(prom):
    r = check(*window(prom, "--job", "ml/train-b", "--json"))
    assert r.returncode == 1, r.stdout + r.stderr
    stalled = next(o for o in lines(r) if o["kind"] == "verdict")
    assert stalled["job"] == "ml/train-b"
    assert {(s["host"], s["state"], s["pod"]) for s in stalled["suspects"]} == {
        ("node-6", "missing", "train-b-worker-1")
    }
    assert len(stalled["suspects"]) == 4 and len(stalled["spinning"]) == 4
    last = iso(T0 + 1005.25)  # node-6's last scrape
    assert (
        f"node-6 GPUs 0, 1, 2, 3 (pod ml/train-b-worker-1) no samples since {last} "
        "(missing from the scrape)" in stalled["text"]
    )


def test_job_narrows_to_one_job_and_its_gpus_events(prom):
    out = lines(check(*window(prom, "--job", "ml/infer", "--json")))
    assert {o["kind"] for o in out} == {"xid", "counter_reset", "summary"}
    assert [j["job"] for j in out[-1]["jobs"]] == ["ml/infer"] and out[-1]["exit"] == 3
    one_line_error(check(*window(prom, "--job", "ml/nope")), "no such job", "ml/train-a")


def test_gputui_exporter_series_are_read_too_and_grouped_per_node(prom):
    r = check(*window(prom, "--nodes", "gx-0", "--json"))
    assert r.returncode == 1, r.stdout + r.stderr
    out = lines(r)
    assert out[-1]["source"] == "gputui exporter"
    stalled = next(o for o in out if o["kind"] == "verdict")
    assert stalled["job"] == "node gx-0" and stalled["since"] == pytest.approx(T0 + 900.25)
    assert [(s["gpu"], s["state"]) for s in stalled["suspects"]] == [("1", "idle")]


# ---------------------------------------------------------------- bad input and bad servers


def test_prometheus_own_error_is_said_in_one_line(prom):
    # 11,000 points per series is Prometheus' limit; a 1 s step over a day asks for
    # 86,401: chunked under it, so the server never refuses; a bad matcher it does refuse.
    r = check(*window(prom, "--match", 'pod=~"("'))
    one_line_error(r, "Prometheus at", "HTTP 400", "parse error")


def test_bad_from_and_a_missing_token_file_are_one_line_each(prom, tmp_path):
    one_line_error(
        check("--prometheus", prom.url, "--from", "yesterday-ish"), "--from", "not a time"
    )
    one_line_error(check("--prometheus", prom.url, "--from", "1h ago", "--to", "2h ago"), "before")
    missing = tmp_path / "no-such-token"
    r = check("--prometheus", prom.url, "--from", "1h ago", "--token-file", str(missing))
    one_line_error(r, "--token-file", "No such file")
    one_line_error(check("--prometheus", "ftp://x", "--from", "1h ago"), "not an http")
    one_line_error(check("--prometheus", prom.url), "needs --from")
    one_line_error(check("--prometheus", prom.url, "--from", "1h ago", "--demo"), "two sources")
    one_line_error(check(*window(prom, "--match", "} or up")), "--match")


def test_a_window_longer_than_the_servers_limit_is_fetched_in_chunks(prom):
    # 30 min at 0.1 s would be 18,001 points per series: Prometheus refuses more than
    # 11,000 in one query, so gputui asks in two chunks and joins them.
    r = check(*window(prom, "--step", "1", "--nodes", "node-2", "--json"))
    assert r.returncode == 3, r.stdout + r.stderr
    assert lines(r)[-1]["step"] == 1.0


# ---------------------------------------------------------------- snapshot --at


def snapshot(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gputui", "snapshot", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def test_snapshot_at_a_moment_shows_every_gpu_and_the_jobs_verdict_then(prom):
    r = snapshot("--prometheus", prom.url, "--at", iso(HANG_AT + 120), "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    state = {(g["host"], g["gpu"]): g["state"] for g in d["gpus"]}
    assert state[("node-1", "2")] == "idle"
    assert state[("node-0", "0")] == "spinning" and state[("node-2", "0")] == "computing"
    assert state[("node-3", "0")] == "computing"  # node-3 left the scrape later
    job = {j["job"]: j for j in d["jobs"]}
    assert job["ml/train-a"]["state"] == "hung"
    assert [(s["host"], s["gpu"]) for s in job["ml/train-a"]["suspects"]] == [("node-1", "2")]
    assert job["ml/infer"]["state"] == "ok"


def test_snapshot_at_before_the_hang_and_after_a_node_left(prom):
    r = snapshot("--prometheus", prom.url, "--at", str(T0 + 1500))
    assert r.returncode == 0, r.stderr
    assert "job ml/train-a: HUNG since " + iso(HANG_AT) in r.stdout
    node3 = [line for line in r.stdout.splitlines() if line.startswith("node-3")]
    assert len(node3) == 4 and all(line.endswith("missing") for line in node3)
    r = snapshot("--prometheus", prom.url, "--at", str(HANG_AT - 60), "--json")
    assert {j["state"] for j in json.loads(r.stdout)["jobs"]} == {"ok"}


# ---------------------------------------------------------------- the dashboard's replay


def dashboard_args(prom: HistoryServer, *more: str):
    from gputui.cli import build_parser

    return build_parser(commands=False).parse_args(
        ["--prometheus", prom.url, "--from", str(HANG_AT - 60), "--to", str(HANG_AT + 120), *more]
    )


def test_the_dashboard_replays_the_blamed_node_and_its_live_detector_agrees(prom):
    from gputui.commands.prom_replay import prom_source
    from gputui.diagnose.hang.detector import diagnose_trace

    src = prom_source(dashboard_args(prom), realtime=False)
    assert src.node == "node-1"  # the node of the GPU the history blames
    assert {g.index for g in src.snaps[0].gpus} == {0, 1, 2, 3}
    assert src.snaps[1].t - src.snaps[0].t == 1.0  # 15 s scrapes, replayed every second
    verdicts = diagnose_trace(src.snaps)
    hung = next(v for v in verdicts if v.state == "hung")
    assert hung.suspects == (2,) and hung.spinning == (0, 1, 3)
    assert "pod ml/train-a-worker-0" in hung.reason
    assert hung.since == pytest.approx(HANG_AT, abs=STEP)


async def test_the_dashboard_shows_the_hang_of_a_prometheus_window(prom):
    from screen import on_screen, run_to_end

    from gputui.commands.prom_replay import prom_source
    from gputui.ui.app import GputuiApp

    app = GputuiApp(prom_source(dashboard_args(prom, "--nodes", "node-1"), realtime=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await run_to_end(app, pilot)
        assert on_screen(app, "HUNG")
        assert on_screen(app, "pod ml/train-a-worker-0")


# ---------------------------------------------------------------- a bundle


def test_a_bundle_keeps_the_blamed_nodes_samples_and_the_windows_verdict(prom, tmp_path):
    out = tmp_path / "bundle"
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "bundle", *window(prom), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert r.returncode == 1, r.stdout + r.stderr  # the window's hang: its code, as check
    assert "verdict: STALLED" in r.stdout and "train-a-worker-0" in r.stdout
    history = [json.loads(x) for x in (out / "prometheus-history.jsonl").read_text().splitlines()]
    assert history[-1]["kind"] == "summary" and history[-1]["exit"] == 1
    assert any(h["kind"] == "verdict" and h["state"] == "hung" for h in history)
    # The node's samples are a replayable recording: check --replay says the same.
    trace = next(out.glob("*.jsonl*"))
    r = check("--replay", str(trace))
    assert r.returncode == 1, r.stdout + r.stderr
