"""Figure 5: "dump all ranks" wall time for 8 processes, against py-spy on them one at a time.

Targets: 8 Python processes started by this script (or the pids given with --pids, e.g. the
ranks of a real job), each with RANK set and waiting in a nested function; rank 3 waits
somewhere else, so the grouping has an odd rank to find. Three ways, alternated in each
round, median over --repeat rounds:

- sequential: `py-spy dump --pid P` for each pid, one after the other (what a person does);
- parallel reference: the same subprocesses from a thread pool of 8 (the floor for parallel);
- gputui: `gputui.tools.attach.dumpall.dump_all` (checks each target before and after the attach,
  reads its rank, parses and groups the stacks).

    python bench/dump_all.py --procs 8 --repeat 5 [--native]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from common import machine, machine_line, median, table, write_json

WORKER = r"""
import os, sys, time
def wait_in_collective():
    time.sleep(3600)
def data_loader():
    time.sleep(3600)
def step(rank):
    if rank == 3:
        data_loader()
    else:
        wait_in_collective()
print("READY", flush=True)
step(int(os.environ["RANK"]))
"""


def find_py_spy() -> str | None:
    try:
        from gputui.tools.which import find_tool

        found = find_tool("py-spy")
        if found:
            return found
    except ImportError:
        pass
    import shutil

    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return shutil.which("py-spy") or (beside if os.access(beside, os.X_OK) else None)


def spawn(n: int) -> list[subprocess.Popen[str]]:
    procs = []
    for r in range(n):
        env = {**os.environ, "RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_RANK": str(r)}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    for p in procs:
        assert p.stdout is not None
        if p.stdout.readline().strip() != "READY":
            raise RuntimeError(f"worker {p.pid} did not start")
    return procs


def py_spy_once(exe: str, pid: int, native: bool) -> bool:
    argv = [exe, "dump", "--pid", str(pid)] + (["--native"] if native else [])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return r.returncode == 0 and "Thread " in r.stdout


def sequential(exe: str, pids: Sequence[int], native: bool) -> tuple[float, int]:
    t0 = time.perf_counter()
    ok = sum(py_spy_once(exe, p, native) for p in pids)
    return time.perf_counter() - t0, ok


def parallel(exe: str, pids: Sequence[int], native: bool) -> tuple[float, int]:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=min(8, len(pids))) as pool:
        ok = sum(pool.map(lambda p: py_spy_once(exe, p, native), pids))
    return time.perf_counter() - t0, ok


def gputui_dump_all(exe: str, pids: Sequence[int], native: bool) -> tuple[float, int, Any]:
    from gputui.tools.attach.dumpall import dump_all

    t0 = time.perf_counter()
    res = dump_all(list(pids), native=native, tool_path=os.path.dirname(exe))
    wall = time.perf_counter() - t0
    return wall, sum(d.result.ok for d in res.dumps), res


def run(
    n: int = 8, repeat: int = 5, native: bool = False, pids: Sequence[int] | None = None
) -> dict[str, Any]:
    exe = find_py_spy()
    if exe is None:
        return {"skipped": "py-spy not found (pip install py-spy)"}
    try:
        import gputui.tools.attach.dumpall  # noqa: F401

        have_gputui = True
    except ImportError as e:
        have_gputui = False
        why = str(e)
    children = [] if pids else spawn(n)
    targets = list(pids) if pids else [c.pid for c in children]
    try:
        if not py_spy_once(exe, targets[0], native):
            return {"skipped": f"py-spy could not dump pid {targets[0]} (ptrace permission?)"}
        seq, par, gt = [], [], []
        oks: dict[str, list[int]] = {"sequential": [], "parallel": [], "gputui": []}
        odd = None
        for i in range(repeat):
            order = ["sequential", "parallel", "gputui"]
            order = order[i % 3 :] + order[: i % 3]  # rotate: no way is always first
            for way in order:
                if way == "sequential":
                    w, ok = sequential(exe, targets, native)
                    seq.append(w)
                elif way == "parallel":
                    w, ok = parallel(exe, targets, native)
                    par.append(w)
                elif have_gputui:
                    w, ok, res = gputui_dump_all(exe, targets, native)
                    gt.append(w)
                    odd = [g.header() for g in res.groups if g.odd]
                else:
                    continue
                oks[way].append(ok)
        out: dict[str, Any] = {
            "procs": len(targets),
            "native": native,
            "py_spy": exe,
            "repeat": repeat,
            "sequential_s": median(seq),
            "parallel_ref_s": median(par),
            "per_process_s": median(seq) / len(targets),
            "ok": {k: min(v) if v else None for k, v in oks.items()},
        }
        if have_gputui:
            out["gputui_s"] = median(gt)
            out["speedup_vs_sequential"] = median(seq) / median(gt)
            out["gputui_vs_parallel_ref"] = median(gt) / median(par)
            out["odd_groups"] = odd
        else:
            out["gputui_skipped"] = f"gputui.tools.attach.dumpall not importable: {why}"
        return out
    finally:
        for c in children:
            c.kill()
        for c in children:
            c.wait()


def report(res: dict[str, Any]) -> str:
    if "skipped" in res:
        return f"dump all: skipped ({res['skipped']})"
    rows = [
        ("py-spy one after the other", res["sequential_s"] * 1e3, 1.0, res["ok"]["sequential"]),
        (
            "parallel reference (8 threads)",
            res["parallel_ref_s"] * 1e3,
            res["sequential_s"] / res["parallel_ref_s"],
            res["ok"]["parallel"],
        ),
    ]
    if "gputui_s" in res:
        rows.append(
            (
                "gputui dump_all",
                res["gputui_s"] * 1e3,
                res["speedup_vs_sequential"],
                res["ok"]["gputui"],
            )
        )
    kind = "py-spy dump --native" if res["native"] else "py-spy dump"
    t = table(rows, (f"{res['procs']} processes, {kind}", "wall ms", "speed-up", "ok"))
    extra = []
    if "gputui_skipped" in res:
        extra.append(res["gputui_skipped"])
    if res.get("odd_groups"):
        extra.append("odd group found: " + "; ".join(res["odd_groups"]))
    return "\n".join([t, *extra])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--native", action="store_true", help="py-spy dump --native")
    ap.add_argument("--pids", type=int, nargs="*", help="dump these instead of own workers")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    print(machine_line(machine()), file=sys.stderr)
    res = run(args.procs, args.repeat, args.native, args.pids)
    print(report(res))
    write_json(args.json, "dump_all", res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
