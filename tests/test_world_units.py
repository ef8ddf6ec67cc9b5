"""The world probe's judgement, without processes: NCCL's INFO lines, a host's events, bisect.

The NCCL lines below are written in the format NCCL 2.18-2.21 prints at NCCL_DEBUG=INFO
(`host:pid:tid [dev] NCCL INFO ...`) for a 2-node job that fell back to sockets; they are
typed from that format, not captured (scripts/device/check_world_probe.sh saves real ones).
"""

from __future__ import annotations

import shlex

from gputui.jsonout import dumps
from gputui.probe.world.bisect import Bisect, _judge_pairs
from gputui.probe.world.model import HostResult, WorldOptions, WorldRun
from gputui.probe.world.nccl import parse_lines, summary, transport_kind
from gputui.probe.world.parse import host_result, short_error
from gputui.probe.world.runner import spec_for, worker_args
from gputui.tools.fleet.run import HostRun

NCCL_LINES = """\
c3:4242:4242 [0] NCCL INFO Bootstrap : Using eth0:10.1.0.3<0>
c3:4242:4242 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
c3:4242:4301 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.
c3:4242:4301 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0
c3:4242:4301 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.3<0>
c3:4242:4301 [0] NCCL INFO Using network Socket
c3:4242:4301 [0] NCCL INFO comm 0x55d0 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0
c3:4242:4301 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
c3:4242:4301 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0
c3:4242:4301 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/Socket/0
c3:4242:4301 [0] NCCL INFO Channel 01/0 : 2[0] -> 3[1] via SHM/direct/direct
""".splitlines()


def test_nccl_lines_explain_socket_instead_of_ib():
    """Version, network, interface, transport per rank pair and the variables behind them."""
    got = parse_lines(NCCL_LINES)
    assert got["version"] == "2.21.5+cuda12.4"
    assert got["network"] == "Socket"
    assert got["ifaces"] == ["eth0 (Socket)"]
    assert got["transports"] == {
        "0->1": "P2P",
        "1->2": "NET/Socket",
        "3->0": "NET/Socket",
        "2->3": "SHM",
    }
    assert got["env"]["NCCL_IB_DISABLE"] == "1"
    assert got["env"]["NCCL_SOCKET_IFNAME"] == "eth0"
    line = summary(got)
    assert "network Socket over eth0 (Socket)" in line and "NCCL_IB_DISABLE=1" in line


def test_transport_kinds():
    assert transport_kind("NET/IB/0/GDRDMA") == "NET/IB"
    assert transport_kind("P2P/IPC") == "P2P"
    assert transport_kind("SHM/direct/direct") == "SHM"


def test_gloo_errors_keep_the_words_that_name_the_peer():
    why = (
        "RuntimeError: [/__w/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] "
        "Connection closed by peer [10.0.0.7]:25802. This is typically caused by a remote "
        "worker crashing. Check the logs."
    )
    assert short_error(why) == "RuntimeError: Connection closed by peer [10.0.0.7]:25802."


def _run(host, stdout="", outcome="done", rc=0, error=None):
    return HostRun(host, outcome, rc, stdout, error, 1.0)


def test_ssh_refusal_names_the_host_with_ssh_own_words():
    why = "ssh: connect to host 10.0.0.3 port 22: Connection refused"
    res = host_result(_run("c3", outcome="refused", rc=255, error=why), WorldOptions())
    assert not res.ok and not res.victim and res.stage == "launch" and res.why == why


def test_missing_torch_and_unreachable_rendezvous_are_the_hosts_own_words():
    opts = WorldOptions()
    ev = (
        '{"event":"start"}\n{"event":"error","stage":"torch","why":"no torch on this host (torch)"}'
    )
    res = host_result(_run("c5", ev, rc=3), opts)
    assert (res.stage, res.why) == ("torch", "no torch on this host (torch)")
    ev = (
        '{"event":"error","stage":"rendezvous",'
        '"why":"cannot reach 10.0.0.3:29500 (connection refused)"}'
    )
    res = host_result(_run("c7", ev, rc=1), opts)
    assert res.why == "cannot reach 10.0.0.3:29500 (connection refused)" and not res.victim


def test_a_host_that_only_waited_for_another_is_a_victim_not_a_culprit():
    ev = '{"event":"rendezvous","ok":false,"joined_s":10.0,"missing":["c9"]}'
    res = host_result(_run("c1", ev, rc=1), WorldOptions())
    assert res.victim and res.missing == ["c9"] and "never joined: c9" in res.why
    res = host_result(_run("c2", '{"event":"start"}', outcome="cancelled", rc=-9), WorldOptions())
    assert res.victim and res.stage == "stopped"


def test_a_host_whose_store_went_away_under_it_is_a_victim():
    """Seen under CI's load: c refused ssh, the world stopped a (the first host, whose store
    the others talk to), and b's rank said "Failed to recv, got 0 bytes. Connection was likely
    closed" before it was stopped too: b was blamed beside c. It only lost its peer."""
    why = (
        "DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the "
        "remote server shutdown or crash?"
    )
    ev = '{"event":"start"}\n' + dumps({"event": "error", "stage": "host", "why": why})
    res = host_result(_run("b", ev, rc=1), WorldOptions())
    assert res.stage == "host" and res.victim
    own = dumps({"event": "error", "stage": "torch", "why": "timed out importing torch"})
    assert not host_result(_run("b", own, rc=3), WorldOptions()).victim  # its own failure


def test_a_hung_host_is_named_with_its_bound():
    res = host_result(
        _run("c4", '{"event":"start"}', outcome="timeout", rc=-9), WorldOptions(host_timeout=20)
    )
    assert not res.victim and res.why == "no answer within 20 s (killed)"


def _world(hosts, ok=True, gbps=40.0, why=None):
    results = [
        HostResult(
            h, ok=ok, why=why, rank_results=[{"sizes": [{"bytes": 1 << 20, "busbw_gbps": gbps}]}]
        )
        for h in hosts
    ]
    return WorldRun(list(hosts), "x", 1, results, 1.0)


def test_bisect_names_a_slow_link_against_the_others():
    b = Bisect()
    hosts = ["c1", "c2", "c4", "c9"]
    for i, a in enumerate(hosts):
        for c in hosts[i + 1 :]:
            b.pairs[(a, c)] = _world([a, c], gbps=3.1 if (a, c) == ("c4", "c9") else 45.0)
    _judge_pairs(b, hosts)
    assert b.findings == ["c4<->c9: 3.1 GB/s (others 45)"]


def test_bisect_names_a_host_failing_with_every_peer_not_each_link():
    b = Bisect()
    hosts = ["c1", "c2", "c3"]
    b.pairs[("c1", "c2")] = _world(["c1", "c2"])
    b.pairs[("c1", "c3")] = _world(["c1", "c3"], ok=False, why="timed out")
    b.pairs[("c2", "c3")] = _world(["c2", "c3"], ok=False, why="timed out")
    _judge_pairs(b, hosts)
    assert list(b.bad_hosts) == ["c3"] and not b.bad_pairs
    assert b.findings[0].startswith("host c3 fails with every peer")


def test_the_remote_command_survives_the_remote_shell_intact():
    """ssh hands the remote side one string: every word quoted, the JSON spec unchanged."""
    opts = WorldOptions()
    args = worker_args(spec_for(["a", "b"], 1, "10.0.0.1", 29500, opts))
    cmd = shlex.join(["/opt/my gputui", *args])
    assert shlex.split(cmd) == ["/opt/my gputui", *args]


def test_a_failing_node_probe_names_the_gpu_that_fails_with_every_peer():
    """Bisect runs `gputui probe --json` on a multi-GPU host that failed alone; its JSON (the
    node probe's own report) names the GPU."""
    from gputui.probe.analysis import report_json
    from gputui.probe.result import PairResult, ProbeReport
    from gputui.probe.world.bisect import node_finding

    rep = ProbeReport(devices=[0, 1, 2, 5], backend="nccl", size=1, timeout_s=30.0)
    for a, c in ((0, 1), (0, 2), (0, 5), (1, 2), (1, 5), (2, 5)):
        ok = 5 not in (a, c)
        rep.pairs.append(PairResult((a, c), ok=ok, reason=None if ok else "NCCL error: unhandled"))
    text = node_finding(dumps(report_json(rep)))
    assert text is not None and text.startswith("GPU 5 is the broken GPU: all its 3 pairs failed")
    assert node_finding("not json") is None
