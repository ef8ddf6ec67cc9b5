"""`gputui dump`: stacks of processes (py-spy, or gdb/cuda-gdb), or of every rank of a job.

Exit status: 0 when every dump worked, 1 when some failed (one line each on stderr), 2 on
bad input (not a number, no such process, --job with more than one PID). With --job, NVML
(only used to see which GPUs the ranks are on) is bounded by --timeout; when it fails or does
not answer, the ranks are found from the host's processes, the stacks are still dumped, and
NVML's state is one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from gputui.commands.common import parse_pids, positive_float
from gputui.errors import GputuiError
from gputui.textsafe import clean

if TYPE_CHECKING:
    from gputui.collect.model import Snapshot
    from gputui.tools.result import ToolResult

LIVE_SAMPLE_TIMEOUT_S = 5.0  # NVML start and one sample for --job, without --timeout


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dump",
        help="Python (py-spy) or native (gdb/cuda-gdb) stacks of processes or of a whole job",
        description=(
            "Dump the stacks of running processes with py-spy (--native adds C/C++ frames), or "
            "a native backtrace of every thread with gdb (cuda-gdb when gdb is absent). With "
            "--job, dump every rank of PID's job in parallel and group identical stacks so "
            "the odd rank stands out. Exit 0: all dumps worked; 1: some failed; 2: bad input."
        ),
    )
    p.add_argument("pids", nargs="*", metavar="PID", help="process id(s) to dump")
    p.add_argument(
        "--job",
        action="store_true",
        help="dump all ranks of the job PID belongs to, grouped by stack",
    )
    how = p.add_mutually_exclusive_group()
    how.add_argument("--native", action="store_true", help="py-spy --native: C/C++ frames too")
    how.add_argument(
        "--gdb",
        action="store_true",
        help="native backtrace of every thread with gdb, or cuda-gdb if gdb is absent",
    )
    p.add_argument(
        "--core",
        metavar="FILE",
        help="gdb's backtrace of every thread of a core file (a rank that crashed)",
    )
    p.add_argument(
        "--exe",
        metavar="PATH",
        help="with --core: the executable that made it (default: read from the core)",
    )
    p.add_argument("--json", action="store_true", help="print JSON results")
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=None,
        metavar="S",
        help="time limit per dump (default: py-spy 10, --native 20, --gdb 60 s), and for "
        f"NVML with --job (default {LIVE_SAMPLE_TIMEOUT_S:g} s)",
    )
    p.set_defaults(func=run)


def _live_snapshot(timeout: float) -> tuple[Snapshot | None, str | None]:
    """One live sample to find jobs from, and NVML's trouble in one line.

    The snapshot is None when NVML is absent, failing or slow: the job is then found from
    the host's processes.
    """
    from gputui.collect.bounded import sample_bounded
    from gputui.collect.live import LiveSource

    try:
        src = LiveSource(timeout=timeout, health_events=False)
    except GputuiError as e:  # NVML did not start in time
        return None, str(e)
    snap = None
    try:
        if src.nvml.devices:
            snap = sample_bounded(src, timeout)
    except GputuiError as e:
        return None, str(e)
    finally:
        src.close()
    return snap, src.problem(snap)


def _fail_lines(results: list[ToolResult]) -> int:
    from gputui.redact import redact_text

    bad = [r for r in results if not r.ok]
    for r in bad:
        print(f"gputui: {clean(redact_text(r.summary()))}", file=sys.stderr)
    return 1 if bad else 0


def _print_kept_tabs(line: str) -> None:
    print(clean(line, keep_tabs=True), flush=True)


def _run_job(args: argparse.Namespace, pid: int) -> int:
    from gputui.jsonout import dumps
    from gputui.tools.attach.dumpall import DumpAll, dump_all
    from gputui.tools.attach.jobfind import JobMembers, find_job

    snap, nvml_problem = _live_snapshot(args.timeout or LIVE_SAMPLE_TIMEOUT_S)
    job: JobMembers = find_job(pid, snap)
    targets: list[Any] = list(job.processes) if job.processes else list(job.pids)
    res: DumpAll = dump_all(
        targets, ranks=job.ranks, native=args.native, timeout=args.timeout, how=job.how
    )
    if args.json:
        doc = {"job": {"pid": pid, "pids": list(job.pids), "how": job.how}, **res.to_json()}
        print(dumps(doc, indent=2))
    else:
        for text, _kind in res.render():
            print(clean(text, keep_newlines=True, keep_tabs=True))  # redacted in tools.runner
    status = _fail_lines([d.result for d in res.dumps])
    if nvml_problem:
        found = "" if snap is not None else "; the ranks were found from host processes"
        print(f"gputui: {nvml_problem}{found}", file=sys.stderr)
        return 2
    return status


def _run_core(args: argparse.Namespace) -> int:
    """`dump --core FILE [--exe PATH]` (gputui.tools.attach.core): bad input is exit 2, a debugger
    that cannot read it exit 1, each with one line."""
    import os

    from gputui.jsonout import dumps
    from gputui.tools.attach.core import core_backtrace

    if not args.core:
        raise GputuiError("--exe goes with --core FILE")
    if args.pids or args.job or args.gdb or args.native:
        raise GputuiError("--core takes a core file, not PIDs or --job/--gdb/--native")
    if not os.path.isfile(args.core):
        raise GputuiError(f"--core {args.core}: no such file")
    if args.exe and not os.path.isfile(args.exe):
        raise GputuiError(f"--exe {args.exe}: no such file")
    kw: dict[str, Any] = {"timeout": args.timeout} if args.timeout else {}
    res = core_backtrace(args.core, args.exe, **kw)
    if args.json:
        print(dumps({"results": [res.to_json()]}, indent=2))
    elif res.ok:
        for ln in res.lines:  # redacted by the runner
            print(ln)
    return _fail_lines([res])


def run(args: argparse.Namespace) -> int:
    from gputui.jsonout import dumps
    from gputui.tools.attach.dumpall import dump_all
    from gputui.tools.attach.stacks import gdb_backtrace

    if args.core or args.exe:
        return _run_core(args)
    pids = parse_pids(args.pids, what="dump")
    if args.job:
        if len(pids) != 1:
            raise GputuiError(f"--job takes exactly one PID (got {len(pids)})")
        if args.gdb:
            raise GputuiError("--job dumps with py-spy; use --gdb on single PIDs")
        return _run_job(args, pids[0])

    results: list[ToolResult] = []
    kids: dict[int | None, list[dict[str, Any]]] = {}  # each rank's children (py-spy only)
    if args.gdb:
        for pid in pids:  # one at a time: cuda-gdb is heavy (11-14 s on a hung rank)
            if len(pids) > 1 and not args.json:
                print(f"==> pid {pid} <==", flush=True)
            # gdb prints a tab between a line number and its source: a tab, not `\t`
            on_line = None if args.json else _print_kept_tabs
            kw: dict[str, Any] = {"on_line": on_line}
            if args.timeout:
                kw["timeout"] = args.timeout
            results.append(gdb_backtrace(pid, **kw))
    else:  # py-spy is fast: in parallel, printed in the order given once done
        res = dump_all(pids, native=args.native, timeout=args.timeout)
        order = {d.pid: d for d in res.dumps}
        kids = {d.pid: [c.to_json() for c in d.children] for d in res.dumps if d.children}
        for pid in pids:
            r = order[pid].result
            results.append(r)
            if not args.json and r.ok:
                if len(pids) > 1:
                    print(f"==> pid {pid} <==")
                for ln in r.lines:
                    print(clean(ln, keep_tabs=True))  # the header quotes a command line
                for c in order[pid].children:  # its DataLoader workers, spawn children
                    print(clean(f"==> child pid {c.pid} of pid {pid}: {c.role} ({c.status}) <=="))
                    for f in c.frames:
                        print(clean(f"    {f.label()}"))
                    if c.error:
                        print(clean(f"    {c.error}"))
    if args.json:
        out = [
            {**r.to_json(), **({"children": kids[r.pid]} if r.pid in kids else {})} for r in results
        ]
        print(dumps({"results": out}, indent=2))
    return _fail_lines(results)
