"""The metrics as Prometheus reads them, and the cost rule: a scrape never samples.

The exposition is produced by prometheus_client and parsed back with its own parser, so the
names, labels and values asserted here are what a Prometheus server stores. The exporter
runs in this process (serve() in a thread) for the tests that count Source.sample calls.
"""

from __future__ import annotations

import socket
import threading
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from synth import snapshot, timeline

from gputui import __version__
from gputui.collect.model import Snapshot
from gputui.diagnose.hang.detector import Detector
from gputui.exporter.metrics import exported_names
from gputui.exporter.run import make_registry, serve
from gputui.exporter.server import serve_metrics
from gputui.exporter.view import Watch

GPU_SERIES = 13  # per GPU with every reading available (docs/commands/exporter.md says so)
JOB_SERIES = 6  # per job (state x4, stall seconds, mismatch), plus one per suspect


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def samples(watch: Watch) -> list:
    """Every gputui sample of one scrape, as prometheus_client's parser reads it."""
    text = generate_latest(make_registry(watch)).decode()
    out = []
    for fam in text_string_to_metric_families(text):
        out += [s for s in fam.samples if s.name.startswith("gputui_")]
    return out


def by_name(ss: list, name: str) -> list:
    return [s for s in ss if s.name == name]


def watch_of(snaps, clock=None) -> Watch:
    w = Watch(Detector(), host="node7", **({"clock": clock} if clock else {}))
    for s in snaps:
        w.on_snapshot(s)
    return w


# ---------------------------------------------------------------- names, labels, values


def test_at_the_demo_stall_every_metric_has_its_labels(demo_snaps):
    w = Watch(Detector(), host="node7")
    for s in demo_snaps:  # up to the sample where the stall_in_loop hang is raised
        w.on_snapshot(s)
        if w.detector.last is not None and w.detector.last.state == "stalled":
            break
    assert s.phase.startswith("stall_in_loop")
    ss = samples(w)
    # Served only where they apply: a slow job's series once a job has a wait history or a
    # straggler; gputui_gpu_owner where a process has an owner (the demo's ranks had none).
    only_when = {"gputui_rank_wait_ratio", "gputui_job_straggler", "gputui_gpu_owner"}
    assert {s.name for s in ss} == set(exported_names()) - only_when
    for s in ss:
        if s.name.startswith("gputui_gpu_"):
            assert {"gpu", "uuid", "host"} <= set(s.labels)
            assert s.labels["uuid"].startswith("GPU-") and s.labels["host"] == "node7"
        if s.name.startswith("gputui_job_"):
            assert s.labels["job"] == "master:127.0.0.1:29512"
        if "pid" in s.labels:
            assert s.name == "gputui_job_suspect"  # pids only on suspect series
    (suspect,) = by_name(ss, "gputui_job_suspect")
    assert suspect.labels == {
        "job": "master:127.0.0.1:29512",
        "gpu": "1",
        "rank": "1",
        "pid": "815",
        "host": "node7",
    }
    state = {s.labels["state"]: s.value for s in by_name(ss, "gputui_job_state")}
    assert state == {"ok": 0.0, "busy": 0.0, "stalled": 1.0, "hung": 0.0}
    gpu_state = {
        (s.labels["gpu"], s.labels["state"]) for s in by_name(ss, "gputui_gpu_state") if s.value
    }
    assert gpu_state == {("0", "spinning"), ("1", "idle")}
    (info,) = by_name(ss, "gputui_build_info")
    assert info.labels == {"version": __version__} and info.value == 1.0
    power = {s.labels["gpu"]: s.value for s in by_name(ss, "gputui_gpu_power_watts")}
    assert 100 < power["0"] < 140  # a spinning H200 draws idle power (~123 W)


def test_series_counts_per_gpu_and_per_job_are_as_documented():
    from dataclasses import replace

    snaps = timeline((12, ["spin", "idle", "compute", "compute"]), jobs=[[0, 1], [2, 3]])
    full = (replace(s, gpus=tuple(replace(g, mem_used_mb=4096.0) for g in s.gpus)) for s in snaps)
    ss = samples(watch_of(full))
    per_gpu = [s for s in ss if s.name.startswith("gputui_gpu_")]
    per_job = [s for s in ss if s.name.startswith("gputui_job_")]
    assert len(per_gpu) == 4 * GPU_SERIES
    assert len(per_job) == 2 * JOB_SERIES + 1  # one stalled job with one suspect
    waits = by_name(ss, "gputui_rank_wait_ratio")  # the healthy job's two GPUs, past 8 s
    assert [w.labels["gpu"] for w in waits] == ["2", "3"]
    assert len(ss) == len(per_gpu) + len(per_job) + len(waits) + 2  # sample age, build info


def test_readings_that_are_not_available_are_left_out_not_exported_as_zero():
    from dataclasses import replace

    s = snapshot(1000.0, ["compute", "idle"])
    blind = replace(s.gpus[1], power_w=None, power_limit_w=None, na={"pids": "Unknown Error"})
    ss = samples(watch_of([replace(s, gpus=(s.gpus[0], blind))]))
    for name in ("gputui_gpu_power_watts", "gputui_gpu_power_limit_watts", "gputui_gpu_processes"):
        assert [x.labels["gpu"] for x in by_name(ss, name)] == ["0"], name
    assert [x.labels["gpu"] for x in by_name(ss, "gputui_gpu_utilization_ratio")] == ["0", "1"]


def test_before_the_first_sample_only_the_age_and_version_are_served():
    clock = Clock()
    w = Watch(Detector(), host="node7", clock=clock)
    clock.now += 7.5
    ss = samples(w)
    assert {s.name for s in ss} == {"gputui_sample_age_seconds", "gputui_build_info"}
    (age,) = by_name(ss, "gputui_sample_age_seconds")
    assert age.value == 7.5 and age.labels == {"host": "node7"}


def test_the_sample_age_grows_while_no_sample_arrives():
    clock = Clock()
    w = watch_of([snapshot(1000.0, ["idle"])], clock=clock)
    ages = []
    for _ in range(3):
        ages.append(by_name(samples(w), "gputui_sample_age_seconds")[0].value)
        clock.now += 20.0
    assert ages == [0.0, 20.0, 40.0]
    w.on_snapshot(snapshot(1001.0, ["idle"]))
    assert by_name(samples(w), "gputui_sample_age_seconds")[0].value == 0.0


# ---------------------------------------------------------------- scrapes never sample


class WedgedSource:
    """Answers `good` samples, then blocks inside sample() as a GPU off the bus makes NVML
    do, until released. Counts the calls."""

    kind = "replay"
    description = "wedged test source"

    def __init__(self, snaps: list[Snapshot], good: int) -> None:
        self.snaps, self.good = snaps, good
        self.calls = 0
        self.answered = threading.Event()  # set when the good samples are all delivered
        self.release = threading.Event()

    def sample(self) -> Snapshot | None:
        self.calls += 1
        if self.calls > self.good:
            self.answered.set()
            self.release.wait(60)
            return None
        return self.snaps[self.calls - 1]

    def next_delay(self) -> float:
        return 0.0

    def close(self) -> None:
        self.release.set()


class Lines:
    """A stream for serve()'s messages; `ready` is set once it says where it serves."""

    def __init__(self) -> None:
        self.text = ""
        self.ready = threading.Event()

    def write(self, s: str) -> None:
        self.text += s
        if "serving http://" in self.text:
            self.ready.set()

    def flush(self) -> None:
        pass

    @property
    def url(self) -> str:
        return self.text.split("serving ", 1)[1].split()[0]


@pytest.fixture
def running() -> Iterator:
    """Start serve() in a thread on a free loopback port; stop it afterwards."""
    started: list[tuple[threading.Thread, threading.Event]] = []

    def start(source) -> str:
        stop, out = threading.Event(), Lines()
        kw = dict(addr="127.0.0.1", port=0, host="t", stall_after=10, hang_after=60)
        t = threading.Thread(target=serve, args=(source,), kwargs={**kw, "stop": stop, "out": out})
        t.start()
        started.append((t, stop))
        assert out.ready.wait(30), out.text
        return out.url

    yield start
    for t, stop in started:
        stop.set()
        t.join(30)
        assert not t.is_alive()


def scrape(url: str) -> list:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return [s for fam in text_string_to_metric_families(text) for s in fam.samples]


def test_scrapes_never_call_the_source_and_still_answer_when_nvml_is_wedged(running):
    """The sampler delivers 50 samples of a stalled job, then blocks inside sample(). 100
    scrapes later the source has still been called 51 times, every scrape answered with
    the last state, and the age says the samples stopped."""
    src = WedgedSource(list(timeline((12.5, ["spin", "idle"]))), good=50)
    url = running(src)
    assert src.answered.wait(30)
    for _ in range(100):
        ss = scrape(url)
    assert src.calls == 51
    stalled = [s for s in ss if s.name == "gputui_job_state" and s.labels["state"] == "stalled"]
    assert stalled[0].value == 1.0
    (age,) = [s for s in ss if s.name == "gputui_sample_age_seconds"]
    assert age.value > 0.0


def test_only_metrics_is_served(running):
    url = running(WedgedSource(list(timeline((1, ["idle"]))), good=4))
    base = url.rsplit("/", 1)[0]
    with urllib.request.urlopen(base + "/", timeout=10) as r:
        assert b"/metrics" in r.read()
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(base + "/secrets", timeout=10)
    assert e.value.code == 404


def test_a_client_that_sends_nothing_is_dropped_and_cannot_block_scrapes():
    """Every worker held by a silent connection: each is closed after the connection
    timeout, and a scrape behind them is answered."""
    w = watch_of([snapshot(1000.0, ["idle"])])
    server = serve_metrics("127.0.0.1", 0, make_registry(w), conn_timeout=0.5)
    try:
        port = server.server_address[1]
        idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(6)]
        ss = scrape(f"http://127.0.0.1:{port}/metrics")
        assert any(s.name == "gputui_build_info" for s in ss)
        for c in idle:
            assert c.recv(1024) == b""  # closed by the server, not left hanging
            c.close()
    finally:
        server.shutdown()
        server.server_close()


class FlakySource(WedgedSource):
    """Like WedgedSource, but the two calls after the first sample raise, as NVML can."""

    raised = 0

    def sample(self) -> Snapshot | None:
        if self.calls == 1 and self.raised < 2:
            self.raised += 1
            raise RuntimeError("NVML_ERROR_UNKNOWN")
        return super().sample()


def test_a_failing_sample_is_said_once_and_sampling_goes_on():
    snaps = [snapshot(1000.0 + k, ["compute" if k else "idle"]) for k in range(4)]
    src = FlakySource(snaps, good=4)
    out = Lines()
    stop = threading.Event()
    kw = dict(addr="127.0.0.1", port=0, host="t", stall_after=10, hang_after=60)
    t = threading.Thread(target=serve, args=(src,), kwargs={**kw, "stop": stop, "out": out})
    t.start()
    try:
        assert out.ready.wait(30) and src.answered.wait(30)
        assert src.raised == 2
        ss = scrape(out.url)
        util = [s.value for s in ss if s.name == "gputui_gpu_utilization_ratio"]
        assert util == [pytest.approx(0.98)]  # the samples after the failures arrived
        assert out.text.count("sampling failed") == 1  # the same failure twice: said once
        assert "sampling failed: RuntimeError: NVML_ERROR_UNKNOWN" in out.text
    finally:
        stop.set()
        t.join(30)
    assert not t.is_alive()


def test_each_gpu_is_labelled_with_the_pods_on_it_like_dcgm_exporter(demo_snaps):
    from dataclasses import replace

    from gputui.collect.procs.owner import Owner

    pod = Owner(
        "pod",
        pod_uid="3f9c1d2e-1234-4abc-9def-0123456789ab",
        pod_name="train-0",
        namespace="ml",
        container_id="a" * 64,
    )
    w = Watch(Detector(), host="node7")
    snap = next(s for s in demo_snaps if s.processes)
    w.on_snapshot(replace(snap, processes=tuple(replace(p, owner=pod) for p in snap.processes)))
    owners = by_name(samples(w), "gputui_gpu_owner")
    assert owners and {o.labels["pod"] for o in owners} == {"train-0"}
    assert {o.labels["namespace"] for o in owners} == {"ml"}
    assert {o.labels["container"] for o in owners} == {"a" * 12}
