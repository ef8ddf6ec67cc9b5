"""Which host a job-wide verdict blames, so the next step can be offered: the world probe's
bisect over that host and its neighbours.

Once `merge` or `fleet` blames a host's hardware, the next step is the same every time: test
that host, alone and against peers, with the job's traffic out of the way. The world probe
(`gputui probe --hosts LIST --bisect`, gputui.probe.world) does exactly that: each host
alone (its GPUs' all_reduce, and its node probe when it has several GPUs), then host pairs,
so a broken host, a broken link between two hosts, and a host whose peers are at fault are
told apart. This picks the host, strongest first:

1. a node's sick GPU (a hardware Xid, uncorrected ECC, a lost GPU), the job's GPUs first:
   `merge` already leads its verdict with it;
2. a stall in which every GPU that answered spins while a host sent nothing: the rank they
   wait for is on a host that did not answer (a crashed node, a dead NIC, a hung kernel).

From one node (the dashboard), a host is blamed the same way through NCCL RAS (`ras_blamed`):
a rank on another host that RAS calls dead or that does not answer, with no last words that
explain it as the program's (a traceback, a CUDA error).

A culprit on a host that answered (a rank that does not spin, its stack elsewhere) is the
program's, not the host's: the next step there is its stack (`gputui dump`), not a probe.

Why neighbours: one host alone cannot tell a broken host from a broken path to it; with two
healthy peers the bisect says "fails with every peer" (the host) or names one pair (the
link). They are the hosts next to it in the list (the scheduler's order, which usually
follows racks and leaf switches), skipping hosts that are themselves blamed or silent.
Pure: the same steps blame the same host in a replay.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gputui.diagnose.states import is_alarm

NEIGHBOURS = 2  # healthy peers beside the blamed host: the fewest that tell host from link


class Verdict(Protocol):
    """What this reads of a job-wide verdict (gputui.diagnose.merge.merged.Merged, which holds a
    HostBlame: a Protocol, so that neither module imports the other back)."""

    @property
    def state(self) -> str: ...
    @property
    def spinning(self) -> tuple[str, ...]: ...
    @property
    def suspects(self) -> tuple[str, ...]: ...
    @property
    def sick(self) -> tuple[str, ...]: ...
    @property
    def silent_hosts(self) -> tuple[str, ...]: ...
    @property
    def waiting_hosts(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class HostBlame:
    """The host to probe, why, and the peers it is probed with."""

    host: str
    why: str
    source: str  # "sick" (a sick GPU on it) | "silent" (nothing sent in the stall) | "ras"
    neighbours: tuple[str, ...] = ()

    @property
    def hosts(self) -> list[str]:
        return [self.host, *self.neighbours]

    def command(self) -> list[str]:
        """The world probe that tests it: the command a person can run as it is."""
        return ["gputui", "probe", "--hosts", ",".join(self.hosts), "--bisect"]

    def command_text(self) -> str:
        return shlex.join(self.command())

    def offer(self) -> str:
        """The verdict's next step that offers this probe (answered once it ran)."""
        return (
            f"Test {self.host} and its neighbours with the world probe (each host alone, then "
            f"host pairs), once the job's ranks are ended: `{self.command_text()}` (or add "
            "--probe-blamed to this command)."
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "why": self.why,
            "source": self.source,
            "neighbours": list(self.neighbours),
            "command": self.command(),
        }


def blamed_host(m: Verdict, hosts: Sequence[str]) -> HostBlame | None:
    """The host the job-wide verdict `m` blames, with its neighbours among `hosts` (every
    host of the merge, in the order given); None when it blames no host's hardware."""
    order = _order(hosts, m)
    bad = {_host_of(s) for s in m.sick} | set(m.silent_hosts)
    if m.sick:
        host = _host_of(m.sick[0])
        why = f"GPU {m.sick[0]}"
        return HostBlame(host, why, "sick", neighbours(host, order, bad))
    if is_alarm(m.state) and not m.suspects and m.silent_hosts:
        host = m.silent_hosts[0]
        why = (
            f"{host} did not answer while every GPU that answered spun in a collective: the "
            "rank they wait for may be there"
        )
        return HostBlame(host, why, "silent", neighbours(host, order, bad))
    return None


def neighbours(host: str, hosts: Sequence[str], skip: set[str]) -> tuple[str, ...]:
    """Up to NEIGHBOURS hosts nearest `host` in `hosts`, after it then before it, alternating;
    hosts in `skip` (blamed or silent themselves) are passed over."""
    if host not in hosts:
        return ()
    i = hosts.index(host)
    out: list[str] = []
    for d in range(1, len(hosts)):
        for j in (i + d, i - d):
            if 0 <= j < len(hosts) and hosts[j] not in skip and hosts[j] not in out:
                out.append(hosts[j])
                if len(out) == NEIGHBOURS:
                    return tuple(out)
    return tuple(out)


def _host_of(entry: str) -> str:
    """ "node-3:1 (rank 5) failed: ..." -> "node-3" (host names hold no space; GPU is last)."""
    return entry.split(" ", 1)[0].rsplit(":", 1)[0]


def _order(hosts: Sequence[str], m: Verdict) -> list[str]:
    """The hosts as given, then any the verdict names that were not given, sorted."""
    seen = list(dict.fromkeys(hosts))
    named = {_host_of(s) for s in (*m.spinning, *m.suspects, *m.sick)} | set(m.silent_hosts)
    named |= set(m.waiting_hosts)
    return seen + sorted(named - set(seen))


# RAS's sentences about a rank on another host (gputui.diagnose.nccl.ras): "rank 5 (node-b,
# pid 42, GPU 1) is dead: ..." (or "(node-b)" alone, when RAS knew no pid or GPU) / "... does
# not answer ..." / "process 42 on node-b (GPU 1) is dead." / "no answer from process 42 on
# node-b (GPU 1)." A rank "on this node" is not one.
_RAS_RANK = re.compile(
    r"^NCCL RAS: rank (\d+) \(([^,()\s]+)(?:, [^)]*)?\) (?:is dead|does not answer)"
)
_RAS_PROC = re.compile(
    r"^NCCL RAS: (?:process \d+ on (\S+) \(GPU [^)]*\) is dead|no answer from process \d+ on "
    r"(\S+) \()"
)


def ras_blamed(
    findings: Iterable[Any], hosts: Sequence[str], me: str, is_here: Callable[[str], bool]
) -> HostBlame | None:
    """The host NCCL RAS names for a rank that is dead or does not answer, from one node's
    verdict findings (gputui.diagnose.ranking.Finding); None when RAS names none, when it is
    this node (`is_here`: RAS names hosts by address, not by `me`, the hostname), or when a
    rank's last words explain its end (the program's fault, not the host's). Neighbours come
    from `hosts` (the dashboard's --probe-hosts) when the host is there, else `me`.

    Args:
        findings: one node's verdict findings.
        hosts: the hosts the person named (`--probe-hosts`).
        me: this node's host name.
        is_here: whether an address RAS names is this node.

    Returns:
        The HostBlame (host, why, neighbours), or None.
    """
    found = list(findings)
    worded = {r for f in found if getattr(f, "source", "") == "lastwords" for r in f.ranks}
    for f in found:
        text = str(getattr(f, "text", ""))
        if getattr(f, "source", "") != "ras" or " on this node" in text:
            continue
        m = _RAS_RANK.match(text)
        if m is not None and int(m.group(1)) in worded:
            continue
        host = m.group(2) if m is not None else None
        if host is None and (p := _RAS_PROC.match(text)) is not None:
            host = p.group(1) or p.group(2)
        if host is None or host == me or is_here(host):
            continue
        order = list(hosts)
        near = neighbours(host, order, set()) if host in order else ((me,) if me else ())
        return HostBlame(host, text, "ras", near)
    return None
