"""`gputui dump --job` and the Watcher's findings on a real N-rank torch.distributed job
(scripts/device/multi_worker.py on gloo: CPU processes, real torch frames, real py-spy).

For each rank count and mode, the job is started (`--spawn N`), and once every rank stands
where the mode puts it (each rank says so on the job's stdout; bounded waits, no sleeps):

- `gputui dump --job PID --json`, run as a user runs it (a new Python each time, so the wall
  time includes gputui's start-up), --repeat times: median wall time, dump_all's own time,
  and the grouping (which ranks stand together, which group is odd, its innermost frame);
- the Watcher, fed synthetic GPU samples (tests/synth.py's measured H200 levels) naming the
  ranks' real pids, waited for its dump: the findings, checked against what the mode means
  (stuck: rank K's function and the others' all_reduce line; mismatch: "ranks entered
  different collectives").

`exit` on gloo is recorded as what it is: gloo notices the closed socket of the rank that
exited, so the others raise at once instead of spinning as NCCL ranks do on a GPU node; the
time from the onset to the last peer's error is the figure. The NCCL run of the same worker
is scripts/device/check_multigpu.sh.

    python bench/multi_rank.py --ranks 4 8 --modes stuck mismatch exit --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import machine, machine_line, table, write_json

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the job helper and the synthetic GPU readings
from targets.multi_job import WORKER, MultiJob, line_of, watch  # noqa: E402


def dump_job(pid: int) -> tuple[float, dict[str, Any] | None, str]:
    t0 = time.perf_counter()
    r = subprocess.run(  # noqa: S603 - our own CLI, an argument list
        [sys.executable, "-m", "gputui", "dump", "--job", str(pid), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    wall = time.perf_counter() - t0
    try:
        return wall, json.loads(r.stdout), r.stderr.strip()
    except json.JSONDecodeError:
        return wall, None, (r.stderr.strip() or f"exit {r.returncode}")[-300:]


def expected(mode: str, n: int, odd: int, pids: list[int]) -> list[str]:
    reduce = line_of(WORKER, "job.dist.all_reduce(job.x)")
    others = ",".join(str(r) for r in range(n) if r != odd)
    if mode == "stuck":
        sleep = line_of(WORKER, "time.sleep(min(1.0, left))")
        return [
            f"rank {odd} (pid {pids[odd]}) is in load_next_batch_stuck (multi_worker.py:{sleep})",
            f"ranks {others} wait in all_reduce (multi_worker.py:{reduce})",
        ]
    bcast = line_of(WORKER, "job.dist.broadcast(job.x, src=0)")
    return [
        f"ranks entered different collectives: ranks {others} in all_reduce "
        f"(multi_worker.py:{reduce}), rank {odd} in broadcast (multi_worker.py:{bcast})"
    ]


def one(n: int, mode: str, repeat: int, start_timeout: float) -> dict[str, Any]:
    odd = min(3, n - 1)
    job = MultiJob(n, mode, odd=odd, lifetime=start_timeout + 120)
    res: dict[str, Any] = {"ranks": n, "mode": mode, "odd": odd}
    try:
        if not job.in_place(start_timeout):
            res["error"] = f"ranks not in place after {start_timeout:g} s: {job.stderr_tail(300)}"
            return res
        res["start_s"] = round(time.monotonic() - job.started, 2)
        pids = job.pids
        if mode == "exit":  # on gloo the peers raise: wait (bounded) for every rank's error
            job.wait_for(lambda lines: sum(x["kind"] == "ERROR" for x in lines) >= n, 30)
            errors = job.of("ERROR")
            peers = [e for e in errors if int(e["rank"]) != odd]
            last = max((float(e["t"]) for e in peers if "t" in e), default=None)
            res["peers_raised"] = len(peers)
            res["peers_error_after_onset_s"] = (
                None if last is None else round(last - job.onset_t, 3)
            )
            wall, doc, err = dump_job(pids[0])
            res["dump_after_exit"] = err or (doc and doc.get("groups"))
            return res
        walls, inner, groups = [], [], None
        for _ in range(repeat):
            wall, doc, err = dump_job(pids[0])
            if doc is None:
                res["error"] = f"dump --job: {err}"
                return res
            walls.append(wall)
            inner.append(doc["elapsed_s"])
            groups = [
                {"ranks": g["ranks"], "odd": g["odd"], "top": (g["stack"] or ["-"])[0]}
                for g in doc["groups"]
            ]
        res["dump_wall_s"] = round(statistics.median(walls), 3)
        res["dump_walls_s"] = [round(w, 3) for w in walls]
        res["dump_all_s"] = round(statistics.median(inner), 3)
        res["groups"] = groups
        states = ["spin"] * n
        if mode == "stuck":
            states[odd] = "idle"
        v = watch(pids, states)
        res["findings"] = list(v.findings)
        res["culprit_frame"] = v.culprit_frame
        res["suspects"] = list(v.suspects)
        want = expected(mode, n, odd, pids)
        res["findings_ok"] = list(v.findings[: len(want)]) == want
        if not res["findings_ok"]:
            res["findings_expected"] = want
        return res
    finally:
        job.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--modes", nargs="+", default=["stuck", "mismatch", "exit"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--start-timeout", type=float, default=180.0)
    ap.add_argument("--json", metavar="PATH")
    a = ap.parse_args(argv)
    print(machine_line(machine()), file=sys.stderr)
    results = []
    for n in a.ranks:
        for mode in a.modes:
            r = one(n, mode, a.repeat, a.start_timeout)
            results.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    rows = []
    for r in results:
        if r["mode"] == "exit":
            what = f"{r.get('peers_raised')} peers raised +{r.get('peers_error_after_onset_s')} s"
        else:
            what = " | ".join(
                f"{'ODD ' if g['odd'] else ''}{g['ranks']}: {g['top']}" for g in r.get("groups", [])
            )
        ok = r.get("findings_ok")
        rows.append(
            (
                r["ranks"],
                r["mode"],
                r.get("start_s"),
                r.get("dump_wall_s"),
                r.get("dump_all_s"),
                "-" if ok is None else ("yes" if ok else "NO"),
                r.get("error") or what,
            )
        )
    head = ("ranks", "mode", "start s", "dump --job s", "dump_all s", "findings", "grouping")
    print(table(rows, head))
    write_json(a.json, "multi_rank", {"results": results})
    bad = [r for r in results if r.get("error") or r.get("findings_ok") is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
