"""The exporter asks NCCL RAS about a stalled job: `gputui_job_suspect` for the ranks RAS names
behind, and `gputui_job_mismatch` when the ranks entered different collectives.

Real: the ranks are real processes whose environment names the RAS address, RAS is the test's
TCP server, behind rank 0's own listener where the answer must be evidence, answering with
NCCL's own answers (the constructed 4-rank "behind" answer, with
the test's pids; the real 2-rank mismatch captured on an H100), and the metrics are scraped
through prometheus_client's own parser. GPU readings are synthetic: every GPU spins, so NVML
alone names no suspect. Covers both series, and that nothing is asked while the job is ok.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from ras_server import ras_server, relayed_ranks
from synth import with_real_pids

from gputui.diagnose.hang.detector import Detector
from gputui.exporter.ras_suspects import RasSuspects
from gputui.exporter.run import make_registry
from gputui.exporter.view import Watch

DATA = Path(__file__).parent / "data" / "ras"


def scrape(w: Watch, name: str) -> list:
    text = generate_latest(make_registry(w)).decode()
    return [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]


def stalled_watch(pids: list[int], answers: list[bytes], port: int) -> Watch:
    """A Watch over 4 s of every GPU spinning (stalled after 2 s), RAS asked at each sample
    and each answer waited for, so the last scrape sees the newest."""
    ras = RasSuspects(interval=0.0)
    w = Watch(Detector(2.0, 60.0), host="n1", ras=ras)
    try:
        with ras_server(*answers, port=port):
            t = 1000.0
            for _ in range(16):
                w.on_snapshot(with_real_pids(t, pids, ["spin"] * len(pids)))
                f = ras.poller.future()
                if f is not None:
                    f.result(timeout=15)
                t += 0.25
            w.on_snapshot(with_real_pids(t, pids, ["spin"] * len(pids)))  # the last answer in
    finally:
        ras.close()
    return w


def ras_port() -> int:
    with ras_server(b"") as srv:
        return srv.port


def test_the_rank_ras_names_behind_is_a_suspect_series(spawn):
    backend = ras_port()
    kids = relayed_ranks(spawn, backend)  # rank 0 holds the RAS port: its answer is evidence
    text = (DATA / "behind-4rank.json").read_text()
    answer = text.replace('"pid": 907', f'"pid": {kids[0].pid}')
    answer = answer.replace('"pid": 908', f'"pid": {kids[1].pid}').encode()
    w = stalled_watch([k.pid for k in kids], [answer] * 40, backend)
    suspects = scrape(w, "gputui_job_suspect")
    named = {(s.labels["gpu"], s.labels["rank"], s.labels["pid"]) for s in suspects}
    assert ("1", "1", str(kids[1].pid)) in named, named
    (mm,) = scrape(w, "gputui_job_mismatch")
    assert mm.value == 0.0


def test_ranks_in_different_collectives_raise_the_mismatch_series(spawn):
    port = ras_port()
    kids = [spawn({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}) for _ in range(2)]
    answer = (DATA / "onegpu" / "ras-onegpu-mismatch-json.txt").read_bytes()
    w = stalled_watch([k.pid for k in kids], [answer] * 40, port)
    (mm,) = scrape(w, "gputui_job_mismatch")
    assert mm.value == 1.0 and mm.labels["host"] == "n1"
    (stalled,) = [s for s in scrape(w, "gputui_job_state") if s.labels["state"] == "stalled"]
    assert stalled.value == 1.0  # the alert on stalled|hung still fires


def test_a_healthy_job_is_not_asked(spawn):
    port = ras_port()
    kids = [spawn({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}) for _ in range(2)]
    ras = RasSuspects(interval=0.0)
    w = Watch(Detector(2.0, 60.0), host="n1", ras=ras)
    with ras_server(b"x", port=port) as srv:
        for i in range(8):
            w.on_snapshot(with_real_pids(1000.0 + i, [k.pid for k in kids], ["compute"] * 2))
        ras.close()
    assert srv.received == [] and ras.poller.future() is None
