"""The blamed host's world probe, judged and joined to the job-wide verdict (pure).

The record comes from gputui.probe.world.blamed_host. What it can say, in the words a person
needs next: the host (or a link of it) is broken, so it is the cause and leaves the job's
hosts; or every host and pair passed, so the host's hardware is cleared and the job is where
to look; or every host and pair passed alone but the whole world failed, which clears no one
and points at what only the whole world shares; or the probe was refused (a job holds that
host's GPUs) or could not run, and why. Probe workers that had to be killed are said, and a
run that needed that clears no one either.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputui.diagnose.merge.merged import Merged


@dataclass(frozen=True)
class HostProbeFinding:
    lines: tuple[str, ...]
    hardware: bool  # a host, link or the world found broken: exit 3 unless a hang was seen
    drain: bool = False  # the blamed host itself is broken: take it out of the job


def explain_host_probe(rec: dict[str, Any]) -> HostProbeFinding:
    """What a world probe of a blamed host found, in lines for the merged verdict.

    Args:
        rec: a `host_probe` record (the world probe's answer).

    Returns:
        The HostProbeFinding: its lines, whether hardware is at fault, whether to drain the host.
    """
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
    leftovers: dict[str, str] = dict(rec.get("leftovers") or {})
    for h, what in leftovers.items():
        lines.append(
            f"world probe over {over}: probe workers on {h} did not exit and were killed "
            f"({what}): a process stuck there in the GPU or the network"
        )
    if not hardware and rec.get("world_ok") is False and not busy:
        lines.append(
            f"world probe over {over}: every host and host pair passes alone, but the "
            f"whole world of {len(rec.get('hosts') or [host])} hosts fails: not {host}'s "
            "hardware alone; look at what only the whole world uses (the switch between "
            "them, NCCL's settings) or probe more hosts"
        )
        hardware = True
    elif not hardware and not leftovers:
        bw = rec.get("busbw_gbps")
        speed = f" (all_reduce {bw:.3g} GB/s)" if isinstance(bw, (int, float)) else ""
        tested = " it could test" if busy else ""
        lines.append(
            f"world probe over {over}: every host and host pair{tested} passed{speed}: "
            f"{host}'s GPUs and links answer; the cause is in the job, not that host's "
            "hardware"
        )
    for h, why in busy.items():
        lines.append(f"world probe over {over}: {h} was not tested: {why}")
    drain = host in bad_hosts or any(host in (a, b) for a, b, _ in bad_pairs)
    return HostProbeFinding(tuple(lines), hardware, drain=drain)


def with_host_probe(m: Merged, found: HostProbeFinding) -> Merged:
    """The verdict with the probe's lines among its findings (first: they answer its
    question), and its next step answered: the probe that was offered is replaced by what
    follows from it."""
    b = m.blamed_host
    steps = tuple(s for s in m.next_steps if b is None or s != b.offer())
    if found.drain and b is not None:
        steps += (
            f"Take {b.host} out of the job (drain it in the scheduler, e.g. `scontrol update "
            f"nodename={b.host} state=drain reason=gputui`) and restart from the last "
            "checkpoint without it.",
        )
    return replace(m, findings=(*found.lines, *m.findings), next_steps=steps)
