"""The blamed host's world probe, judged and joined to the job-wide verdict (pure).

The record comes from gputui.probe.world.blamed_host. What it can say, in the words a person
needs next: the host (or a link of it) is broken, so it is the cause and leaves the job's
hosts; or every host and pair passed, so the host's hardware is cleared and the job is where
to look; or the probe was refused (a job holds that host's GPUs) or could not run, and why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputui.diagnose.merge.join import Merged


@dataclass(frozen=True)
class HostProbeFinding:
    lines: tuple[str, ...]
    hardware: bool  # a host or link named broken: exit 3 unless a hang was seen


def explain_host_probe(rec: dict[str, Any]) -> HostProbeFinding:
    host = str(rec.get("host"))
    over = ", ".join(str(h) for h in rec.get("hosts") or [host])
    outcome = rec.get("outcome")
    if outcome == "failed":
        why = rec.get("error")
        return HostProbeFinding((f"the world probe of {host} could not run: {why}",), False)
    if outcome == "refused":
        why = (rec.get("busy") or {}).get(host, "its GPUs are in use")
        return HostProbeFinding(
            (
                f"the world probe of {host} is refused: {why}. End the job's ranks there "
                "first (on that host: gputui, then X after the bundle b), then probe again.",
            ),
            False,
        )
    bad_hosts: dict[str, str] = dict(rec.get("bad_hosts") or {})
    bad_pairs = [tuple(p) for p in rec.get("bad_pairs") or []]
    busy: dict[str, str] = dict(rec.get("busy") or {})
    lines: list[str] = []
    if host in bad_hosts:
        lines.append(f"world probe over {over}: host {host} is broken: {bad_hosts[host]}")
    for h, why in bad_hosts.items():
        if h != host:
            lines.append(f"world probe over {over}: host {h} also fails: {why}")
    for a, b, why in bad_pairs:
        lines.append(f"world probe over {over}: the link {a}<->{b} fails: {why}")
    hardware = bool(bad_hosts or bad_pairs)
    if not hardware:
        bw = rec.get("busbw_gbps")
        speed = f" (all_reduce {bw:.3g} GB/s)" if isinstance(bw, (int, float)) else ""
        lines.append(
            f"world probe over {over}: every host and host pair passed{speed}: {host}'s GPUs "
            "and links answer; the cause is in the job, not that host's hardware"
        )
    for h, why in busy.items():
        lines.append(f"world probe over {over}: {h} was not tested: {why}")
    return HostProbeFinding(tuple(lines), hardware)


def join(m: Merged, found: HostProbeFinding) -> Merged:
    """The verdict with the probe's lines among its findings (first: they answer its
    question), and its next step answered: the probe that was offered is replaced by what
    follows from it."""
    b = m.blamed_host
    steps = tuple(s for s in m.next_steps if b is None or s != b.offer())
    if found.hardware and b is not None:
        steps += (
            f"Take {b.host} out of the job (drain it in the scheduler, e.g. `scontrol update "
            f"nodename={b.host} state=drain reason=gputui`) and restart from the last "
            "checkpoint without it.",
        )
    return replace(m, findings=(*found.lines, *m.findings), next_steps=steps)
