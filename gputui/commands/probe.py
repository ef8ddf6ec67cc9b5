"""`gputui probe`: peer copy and 2-rank all_reduce for every pair of GPUs, as a matrix.

Bad input (a GPU list that does not parse, an index not present, fewer than 2 devices, no
torch, no GPUs for nccl) is one line and exit 2, before anything starts. Then exit 0 when every
pair passed, 1 when any failed: scripts can gate a node on it.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from gputui.commands.common import plain_int, positive_float
from gputui.errors import GputuiError

INSTALL_HINT = "the probe needs torch: pip install 'gputui[probe]'"
_UNITS = {"": 1, "k": 2**10, "kib": 2**10, "m": 2**20, "mib": 2**20, "g": 2**30, "gib": 2**30}


MAX_SIZE = 32 << 30
"""Largest --size: 32 GiB per buffer already fills a quarter of an H200 on each side of a
copy; beyond that the probe measures the allocator, not the link."""
MAX_CPU_DEVICES = 64
"""Largest --cpu: each simulated device is a process; 64 already means 63 rounds of pairs."""
MAX_GPU_INDEX = 255


def size_bytes(text: str) -> int:
    """argparse type: a byte count > 0; 268435456, 256M, 256MiB and 1G all work."""
    t = text.strip().lower()
    num = t.rstrip("kmgib")
    unit = t[len(num) :]
    if unit not in _UNITS or not re.fullmatch(r"[0-9]+(\.[0-9]*)?|\.[0-9]+", num):
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text[:40]!r}")
    # A number longer than any size (5,000 digits) is out of range as it is: float() of it is
    # infinity, and int(infinity) raised OverflowError.
    f = float(num) * _UNITS[unit] if len(num) <= 40 else math.inf
    v = int(f) if math.isfinite(f) else MAX_SIZE + 1
    if not 0 < v <= MAX_SIZE:
        raise argparse.ArgumentTypeError(
            f"size must be more than 0 bytes and at most 32G: {text[:40]!r}"
        )
    return v


def gpu_list(text: str) -> list[int]:
    """argparse type: '0,1,3' -> [0, 1, 3]; no duplicates, no negatives."""
    try:
        out = [plain_int(x, 0, MAX_GPU_INDEX, "a GPU index") for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected GPU indices 0..{MAX_GPU_INDEX} like 0,1,2: {text[:40]!r}"
        ) from None
    if len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"GPU indices must be distinct and >= 0: {text[:40]!r}")
    return out


def gpu_index(text: str) -> int:
    try:
        return plain_int(text, 0, MAX_GPU_INDEX, "a GPU index")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def cpu_count(text: str) -> int:
    try:
        return plain_int(text, 2, MAX_CPU_DEVICES, "a number of devices")
    except ValueError as e:
        raise argparse.ArgumentTypeError(
            f"{e} (a pair needs at least 2 devices; at most {MAX_CPU_DEVICES})"
        ) from None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "probe",
        help="probe every GPU pair: peer copy and NCCL all_reduce, as a matrix",
        description="For every pair of GPUs: a peer copy each way and a 2-rank all_reduce, "
        "each checked and timed, pairs isolated in their own processes with a timeout. "
        "Exit 0 when all pairs pass, 1 when any fails. Needs torch (gputui[probe]). "
        "With --hosts LIST: the whole world across hosts (one rank per GPU, rendezvous, "
        "barrier, all_reduce), bisected to the failing host or link when it fails.",
    )
    p.add_argument(
        "--gpus",
        type=gpu_list,
        default=None,
        metavar="LIST",
        help="GPU indices to probe, e.g. 0,1,2,3 (default: all)",
    )
    p.add_argument(
        "--pairs-with",
        type=gpu_index,
        default=None,
        metavar="G",
        help="only the pairs that include GPU G, one after another (the pairs of a suspect "
        "GPU against each peer)",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=30.0,
        metavar="S",
        help="seconds per pair before it is killed and marked failed (default 30)",
    )
    p.add_argument(
        "--size",
        type=size_bytes,
        default=None,
        metavar="BYTES",
        help="bytes per copy and all_reduce (default 256M on GPUs, 8M on gloo)",
    )
    p.add_argument(
        "--backend",
        choices=("nccl", "gloo"),
        default=None,
        help="nccl: the GPUs; gloo: CPU processes as simulated devices "
        "(default nccl, or gloo with --cpu)",
    )
    p.add_argument(
        "--cpu",
        type=cpu_count,
        default=None,
        metavar="N",
        help="with gloo: number of simulated devices (default 4)",
    )
    p.add_argument(
        "--out", type=Path, default=None, metavar="FILE", help="also write the JSON results to FILE"
    )
    from gputui.commands.probe_world import add_world_options

    add_world_options(p)
    p.set_defaults(func=run)


def select_devices(args: argparse.Namespace) -> tuple[str, list[int]]:
    """(backend, devices) from the arguments; GputuiError (exit 2) when they cannot work."""
    backend = args.backend or ("gloo" if args.cpu is not None else "nccl")
    if backend == "nccl" and args.cpu is not None:
        raise GputuiError("--cpu only applies with --backend gloo")
    if backend == "gloo":
        present = list(range(args.cpu or 4))
        what = "simulated devices"
    else:
        from gputui.probe.topology import gpu_count

        n, why = gpu_count()
        if n == 0:
            raise GputuiError(
                f"no GPUs to probe ({why}); to try the probe on CPU processes: "
                "gputui probe --backend gloo --cpu 4"
            )
        present = list(range(n))
        what = "GPUs"
    devices = args.gpus if args.gpus is not None else present
    missing = [d for d in devices if d not in present]
    if missing:
        raise GputuiError(
            f"no such device {','.join(map(str, missing))}: there are "
            f"{len(present)} {what} (0-{len(present) - 1})"
        )
    if len(devices) < 2:
        raise GputuiError(
            f"a probe needs at least 2 devices, got {len(devices)} ({len(present)} {what} present)"
        )
    return backend, devices


def run(args: argparse.Namespace) -> int:
    from gputui.jsonout import dumps
    from gputui.probe.analysis import report_json, report_text, save_report
    from gputui.probe.runner import ProbeConfig, Progress, run_probe, torch_installed

    if getattr(args, "hosts", None) is not None or getattr(args, "world_worker", None) is not None:
        from gputui.commands.probe_world import run_hidden, run_hosts

        hidden = run_hidden(args)
        if hidden is not None:
            return hidden
        if getattr(args, "launcher", None) == "local" and not torch_installed():
            raise GputuiError(INSTALL_HINT)  # every "host" runs here: torch missing is ours
        return run_hosts(args)
    if getattr(args, "world_reap", None) is not None:
        from gputui.commands.probe_world import run_hidden

        return run_hidden(args) or 0
    if not torch_installed():
        raise GputuiError(INSTALL_HINT)
    backend, devices = select_devices(args)
    only = getattr(args, "pairs_with", None)
    if only is not None and only not in devices:
        raise GputuiError(f"--pairs-with {only}: not among the devices probed ({devices})")
    cfg = ProbeConfig(devices, backend, size=args.size, timeout=args.timeout, only=only)
    show = not args.json and sys.stderr.isatty()

    def progress(p: Progress) -> None:
        if show and p.running and p.last is None:
            pairs = ", ".join(f"{a}-{b}" for a, b in p.running)
            print(f"round {p.round + 1}/{p.rounds}: {pairs}", file=sys.stderr)

    report = run_probe(cfg, on_progress=progress)
    data = report_json(report)
    if args.out is not None:
        try:
            save_report(report, args.out)
        except OSError as e:
            raise GputuiError(f"cannot write {args.out}: {e.strerror or e}") from None
    print(dumps(data, indent=2) if args.json else report_text(report))
    return 0 if report.ok else 1
