"""What `gputui check` does after its verdict: read a debug server's dumps when the job is gone
(`--debug-dump-dir`), and probe the GPU the verdict blames (`--probe-blamed`).

Both join the verdict as findings and print one more line (a JSON object with --json): the
dump's answer under `debugserver`, the probe's under `blamed_probe`. The probe is refused
while ranks hold the GPUs (the way out ends them first: gputui.probe.blamed), and in a
replay (its GPUs are another node's).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gputui.commands.common import plain_int, positive_float

PROBE_TIMEOUT_S = 30.0


def add_probe_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--probe-blamed",
        action="store_true",
        help="after the verdict, run the pair probe of the GPU it blames (a hardware Xid, a "
        "link whose error rate stands out, a slowed straggler, a sick GPU) against each peer, "
        "and join the result; refused while ranks hold the GPUs (end them first)",
    )
    p.add_argument(
        "--blame-gpu",
        type=_gpu,
        default=None,
        metavar="G",
        help="with --probe-blamed: probe GPU G whatever the verdict blames (a drill)",
    )
    p.add_argument(
        "--probe-backend",
        choices=("nccl", "gloo"),
        default="nccl",
        help="with --probe-blamed: nccl (the GPUs, default) or gloo (CPU processes standing in "
        "for them, a drill without GPUs)",
    )
    p.add_argument(
        "--probe-timeout",
        type=positive_float,
        default=PROBE_TIMEOUT_S,
        metavar="S",
        help=f"with --probe-blamed: seconds per pair (default {PROBE_TIMEOUT_S:g})",
    )


def _gpu(text: str) -> int:
    try:
        return plain_int(text, 0, 255, "a GPU index")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


@dataclass
class After:
    """Lines to print after the run, and exit codes to add."""

    json: list[dict[str, Any]] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    codes: set[int] = field(default_factory=set)


def after_check(
    args: argparse.Namespace,
    watcher: Any,
    last: Any,
    last_alarm: Any,
    snap: Any,
    line: Callable[[Any], dict[str, Any]],
) -> After:
    """The dump's and the probe's lines; `line(verdict)` is check's JSON object for it."""
    out = After()
    if last is None or snap is None:
        return out
    live = not (getattr(args, "replay", None) or getattr(args, "demo", False))
    v = last_alarm or last
    if getattr(args, "debug_dump_dir", None) and live and last_alarm is None:
        v = _dump(args, v, snap, line, out)
    if getattr(args, "probe_blamed", False):
        _probe(args, watcher, v, snap, live, line, out)
    return out


def _dump(args: argparse.Namespace, v: Any, snap: Any, line: Callable, out: After) -> Any:
    """The job is gone (no alarm): its debug server's last dump, joined to the verdict."""
    from gputui.collect.nccl.debugserver import read_dump
    from gputui.diagnose.evidence import fold
    from gputui.diagnose.nccl.debugserver import explain_debugserver

    rec = read_dump(args.debug_dump_dir, v.job or "", "gone", {}, time.time())
    if rec is None:
        out.text.append(f"debug server dumps: no stacks_*.txt in {args.debug_dump_dir}")
        return v
    ev = explain_debugserver(rec, v, snap)
    joined = fold(v, [ev])
    out.json.append(line(joined))
    out.text += [f"the debug server's dump: {f}" for f in ev.findings]
    return joined


def _probe(
    args: argparse.Namespace,
    watcher: Any,
    v: Any,
    snap: Any,
    live: bool,
    line: Callable,
    out: After,
) -> None:
    from gputui.diagnose.exitcodes import SICK_GPU
    from gputui.diagnose.health.blame import Blame, blamed, forced
    from gputui.diagnose.health.blamed_probe import explain_blamed_probe, with_probe_findings
    from gputui.diagnose.ranking import Strength

    blame: Blame | None
    if args.blame_gpu is not None:
        blame = forced(args.blame_gpu)
    else:
        health = watcher.health
        sick = {h.gpu: f"GPU {h.gpu} is {h.word}: {h.reason}" for h in health.sick(snap.gpus)}
        blame = blamed(v, sick, health.links.findings())
    if blame is None:
        _host(v, line, out)
        return
    if not live:
        why = "a replay: its GPUs are the recorded node's, not this machine's"
        out.text.append(f"--probe-blamed: GPU {blame.gpu} is not probed: {why}")
        out.json.append(
            {**line(v), "blamed_probe": {**blame.to_json(), "outcome": "not run", "error": why}}
        )
        return
    rec = _run(args, blame, v, snap)
    ev = explain_blamed_probe(rec, v, snap)
    joined = with_probe_findings(v, ev)
    out.json.append(line(joined))
    out.text += [f"probe of GPU {blame.gpu} ({blame.why}): {f}" for f in ev.findings]
    if any(f.strength == Strength.HARDWARE for f in ev.ranked):
        out.codes.add(SICK_GPU)


def _host(v: Any, line: Callable, out: After) -> None:
    """No GPU blamed: the host NCCL RAS blames (a rank there dead or silent), said with the
    world probe to run; `check` runs no world probe itself (it knows no launcher or host list:
    `gputui merge`/`fleet --probe-blamed` and the dashboard's B do)."""
    from gputui.probe.world.blamed_host import ras_blamed_here

    hb = ras_blamed_here(v.ranked)
    if hb is None:
        out.text.append("--probe-blamed: the verdict blames no GPU; nothing to probe")
        out.json.append({**line(v), "blamed_probe": {"outcome": "nothing blamed"}})
        return
    out.text.append(
        f"--probe-blamed: the verdict blames host {hb.host} ({hb.why}); probe it against this "
        f"node: `{hb.command_text()}`"
    )
    out.json.append({**line(v), "blamed_host": {**hb.to_json(), "outcome": "not run"}})


def _run(args: argparse.Namespace, blame: Any, v: Any, snap: Any) -> dict[str, Any]:
    from gputui.probe.blamed import holders, probe_blamed, refused_record
    from gputui.probe.runner import Progress

    devices = [g.index for g in snap.gpus]
    held = holders(snap.processes, devices)
    if held:
        return refused_record(blame, held, v.job)

    def progress(p: Progress) -> None:
        if p.running and p.last is None and not args.json:
            pairs = ", ".join(f"{a}-{b}" for a, b in p.running)
            print(
                f"probe of GPU {blame.gpu}: pair {p.round + 1}/{p.rounds}: {pairs}", file=sys.stderr
            )

    rec, _report = probe_blamed(
        blame,
        devices,
        backend=args.probe_backend,
        timeout=args.probe_timeout,
        job=v.job,
        on_progress=progress,
    )
    return rec
