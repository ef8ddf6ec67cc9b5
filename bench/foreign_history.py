"""A recording gputui's writer did not make, and what reading it costs beside `json.loads`.

Issue 42: a file of *minimal* GPU lines in the calibration format (`{"t": ..., "gpu": 0,
"util": ..., "mem_util": ..., "power_w": ..., ...}`, the floor fields only, as a cron job or
another tool writes them with `json.dumps`), 2 GPUs x 100,000 samples (7 hours at 4 Hz,
200,000 lines): reading every line with `json.loads` took 0.92 s, `snapshot --replay` 36 s at
366 MB peak RSS, `check --replay` 27 s. This script makes such a file and times, side by side
in one run, each in a fresh process (start-up included, `.pyc` compiled first as pip leaves
them):

- the floor: the file's lines read and each given to `json.loads`, nothing else;
- `gputui snapshot --replay F` and `gputui check --replay F` (and `--json`), wall and CPU
  seconds and the child's peak RSS (`resource.getrusage(RUSAGE_CHILDREN)`, one child per
  measurement so the peak is its own);
- with `--csv`, the same samples as the CSV `nvidia-smi --query-gpu=... --format=csv -l 1`
  writes, read by the same commands.

The file is made deterministically from the real 2 x H200 calibration trace
(tests/data/h200x2-trace.jsonl.gz): its healthy phases (idle, training, communication, an
idle inference server) cycle for the whole file, each cycle a job with pids of its own; at 60 %
of the file the `stall_in_loop` phase (GPU 0 spins in all_reduce, GPU 1's rank is stuck on the
CPU) is held for ten minutes: a hang, after which the job is gone and the cycles go on.

    python bench/foreign_history.py                      # make the files (once), time all
    python bench/foreign_history.py --repeat 3 --json out.json
    python bench/foreign_history.py --before 7272082     # also time the code of a revision
    python bench/foreign_history.py --hang-at 0.2 --hang-s 20000   # the file ends in a hang
    python bench/foreign_history.py --quiet-off          # check's quiet step off too, compared
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, machine, machine_line, median, table, write_json  # noqa: E402

DATA = ROOT / "tests" / "data"
T0 = 1_795_500_000.0
HZ = 4.0
HANG_S = 600.0  # the hang lasts ten minutes
HANG_AT = 0.6  # where in the file it starts
CYCLE = ("idle", "train_init", "train", "between", "comm_heavy_init", "comm_heavy",
         "serve_idle_init", "serve_idle")  # fmt: skip
FLOOR = ("util", "mem_util", "power_w", "sm_mhz", "mem_used_mb", "temp", "pstate", "events")

# nvidia-smi's own header for these columns (`--format=csv`; `nounits` drops the units)
CSV_COLUMNS = (
    ("timestamp", "timestamp", None),
    ("index", "index", None),
    ("utilization.gpu [%]", "util", " %"),
    ("utilization.memory [%]", "mem_util", " %"),
    ("power.draw [W]", "power_w", " W"),
    ("power.limit [W]", None, " W"),
    ("memory.used [MiB]", "mem_used_mb", " MiB"),
    ("temperature.gpu", "temp", ""),
    ("clocks.current.sm [MHz]", "sm_mhz", " MHz"),
)


def _phases() -> dict[str, list[list[dict[str, Any]]]]:
    """The calibration trace's samples (both GPUs' lines) by phase, in order."""
    out: dict[str, list[list[dict[str, Any]]]] = {}
    with gzip.open(DATA / "h200x2-trace.jsonl.gz", "rt") as f:
        sample: list[dict[str, Any]] = []
        for line in f:
            d = json.loads(line)
            if sample and (d["gpu"] == 0 or abs(d["t"] - sample[0]["t"]) > 0.2):
                out.setdefault(sample[0]["phase"], []).append(sample)
                sample = []
            sample.append(d)
        if sample:
            out.setdefault(sample[0]["phase"], []).append(sample)
    return out


def samples(n: int) -> Iterator[tuple[float, list[dict[str, Any]]]]:
    """(t, both GPUs' readings) of `n` samples: the healthy cycle, a hang at HANG_AT."""
    ph = _phases()
    cycle = [(name, s) for name in CYCLE for s in ph[name]]
    spin = [  # GPU 0 spinning (a kernel at full util, no memory traffic, idle power)
        s for s in ph["stall_in_loop"]
        if s[0]["util"] >= 90 and s[0]["mem_util"] <= 1 and s[0]["power_w"] <= 150
        and s[1]["util"] <= 5
    ]  # fmt: skip
    hang_from, hang_n = int(n * HANG_AT), int(HANG_S * HZ)
    k = 0
    for i in range(n):
        t = round(T0 + i / HZ, 3)
        if hang_from <= i < hang_from + hang_n:
            src, shift = spin[(i - hang_from) % len(spin)], 10_000_000
        else:
            src, shift = cycle[k % len(cycle)][1], 0
            k += 1
        job = (k // len(cycle)) * 16 + shift  # each cycle is a job of its own pids
        out = []
        for d in src:
            pids = [p + job if p + job <= 4_000_000 else p for p in d.get("pids") or []]
            out.append({f: d.get(f) for f in FLOOR} | {"gpu": d["gpu"], "pids": pids})
        yield t, out


def make_jsonl(path: Path, n: int) -> None:
    """Minimal GPU lines as `json.dumps` writes them (the calibration recorder's style)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:  # type: ignore[operator]
        for t, gpus in samples(n):
            for d in gpus:
                f.write(json.dumps({"t": t, "gpu": d["gpu"], **{k: d[k] for k in FLOOR},
                                    "pids": d["pids"]}) + "\n")  # fmt: skip


def make_csv(path: Path, n: int, units: bool = True) -> None:
    """The CSV of `nvidia-smi --query-gpu=timestamp,index,... --format=csv -l 1`."""
    head = [c[0] if units else c[0].split(" [")[0] for c in CSV_COLUMNS]
    with open(path, "w", encoding="utf-8") as f:
        f.write(", ".join(head) + "\n")
        for t, gpus in samples(n):
            stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(t))
            stamp += f".{round(t * 1000) % 1000:03d}"
            for d in gpus:
                row = []
                for _name, key, unit in CSV_COLUMNS:
                    if key == "timestamp":
                        row.append(stamp)
                    elif key == "index":
                        row.append(str(d["gpu"]))
                    elif key is None:
                        row.append("700.00" + (unit if units else ""))
                    elif d.get(key) is None:
                        row.append("[N/A]")
                    else:
                        v = d[key]
                        v = f"{v:.2f}" if key == "power_w" else str(int(v))
                        row.append(v + (unit if units else ""))
                f.write(", ".join(row) + "\n")


FLOOR_CODE = r"""
import gzip, json, sys
path = sys.argv[1]
f = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
n = 0
loads = json.loads
for line in f:
    loads(line)
    n += 1
print(n)
"""


def _run(argv: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """One child: wall s, CPU s (user + system), its peak RSS in MB, exit code, output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(cwd)
    env.update(extra_env or {})
    r = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=cwd, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # ru_maxrss of RUSAGE_CHILDREN is the largest child's so far: the children are timed
    # largest-last is not guaranteed, so each measurement runs in its own grandchild below.
    return {"wall": wall, "cpu": cpu, "rc": r.returncode, "out": r.stdout, "err": r.stderr}


PEAK_CODE = r"""
import resource, subprocess, sys, time, json
t = time.perf_counter()
r = subprocess.run(sys.argv[1:], capture_output=True, check=False)
wall = time.perf_counter() - t
u = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stdout.buffer.write(r.stdout)
sys.stderr.buffer.write(r.stderr)
print(json.dumps({"wall": wall, "cpu": u.ru_utime + u.ru_stime, "rss_mb": u.ru_maxrss / 1024}),
      file=sys.stderr)
sys.exit(r.returncode)
"""


def measure(argv: list[str], cwd: Path, extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """`argv` run under a small parent whose only child it is: its own peak RSS."""
    r = _run([sys.executable, "-c", PEAK_CODE, *argv], cwd, extra_env)
    lines = r["err"].rstrip().splitlines()
    got = json.loads(lines[-1])
    return {**got, "rc": r["rc"], "out": r["out"], "err": "\n".join(lines[:-1])}


def compile_tree(cwd: Path) -> None:
    """`.pyc` for every module, as `pip install` leaves them (this box sets
    PYTHONDONTWRITEBYTECODE, which would make every child compile gputui again)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(cwd / "gputui")], check=True)


QUIET_OFF = {"GPUTUI_REPLAY_QUIET": "0"}  # every sample judged in full (gputui.watch.quiet)


def run(
    files: dict[str, Path], repeat: int, before: str | None, hung_s: float, quiet_off: bool = False
) -> dict[str, Any]:
    """`hung_s`: a moment late in the hang, seconds into the file (snapshot's window then
    reaches back to where the spin began). `quiet_off`: check's cases again with the quiet
    step off, their output compared byte for byte with the quiet step's."""
    py = [sys.executable, "-m", "gputui"]
    trees = {"": ROOT}
    out: dict[str, Any] = {}
    rows = []
    with tempfile.TemporaryDirectory(prefix="gputui-before-") as tmp:
        if before:
            from health_cost import extract

            trees[f" (before: {before})"] = extract(before, Path(tmp))
        for cwd in trees.values():
            compile_tree(cwd)
        for fname, path in files.items():
            fl = None
            # each case is timed beside a floor run of its own (floor, case, floor, case...):
            # on a shared box the speed drifts over minutes, and a ratio of two blocks timed
            # minutes apart carries that drift; the ratio shown is the median of the pairs'.
            floor_argv = [sys.executable, "-c", FLOOR_CODE, str(files.get("plain", path))]
            if fname != "csv":  # a CSV is measured against the JSON file's floor
                floor = [measure([sys.executable, "-c", FLOOR_CODE, str(path)], ROOT)
                         for _ in range(repeat)]  # fmt: skip
                fl = median([m["wall"] for m in floor])
                fl_cpu = median([m["cpu"] for m in floor])
                rss = max(m["rss_mb"] for m in floor)
                rows.append((f"{fname}: json.loads floor", fl, fl_cpu, rss, 1.0, 1.0))
                out[f"{fname}: floor"] = {"wall_s": fl, "cpu_s": fl_cpu, "rss_mb": rss}
            else:
                fl = out.get("plain: floor", {}).get("wall_s")
                fl_cpu = out.get("plain: floor", {}).get("cpu_s")
            cases = {
                "snapshot --replay": [*py, "snapshot", "--replay", str(path)],
                "snapshot --at (in the hang)": [
                    *py,
                    "snapshot",
                    "--replay",
                    str(path),
                    "--at",
                    f"{hung_s:.0f}",
                ],
                "check --replay": [*py, "check", "--replay", str(path)],
                "check --replay --json": [*py, "check", "--replay", str(path), "--json"],
            }
            if quiet_off:
                for name in [n for n in cases if n.startswith("check")]:
                    cases[f"{name} (quiet step off)"] = cases[name]
            seen: dict[str, tuple[int, str]] = {}
            for label, cwd in trees.items():
                if label and fname == "csv":
                    continue  # no CSV reader before this work
                for name, argv in cases.items():
                    if label and name.endswith("(quiet step off)"):
                        continue  # no quiet step before this work
                    env = QUIET_OFF if name.endswith("(quiet step off)") else None
                    pairs = [(measure(floor_argv, ROOT), measure(argv, cwd, env))
                             for _ in range(repeat)]  # fmt: skip
                    ms = [m for _, m in pairs]
                    bad = [m for m in ms if m["rc"] not in (0, 1)]
                    if bad:
                        raise SystemExit(f"{name} {fname}{label}: exit {bad[0]['rc']}: "
                                         f"{bad[0]['err'][-500:]}")  # fmt: skip
                    wall = median([m["wall"] for m in ms])
                    rss = max(m["rss_mb"] for m in ms)
                    cpu = median([m["cpu"] for m in ms])
                    ratio = median([m["wall"] / f["wall"] for f, m in pairs])
                    cpu_ratio = median([m["cpu"] / max(f["cpu"], 1e-6) for f, m in pairs])
                    rows.append((f"{fname}: {name}{label}", wall, cpu, rss, ratio, cpu_ratio))
                    if not label:  # the quiet step's proof: the same bytes, the same exit
                        got = (ms[0]["rc"], ms[0]["out"])
                        base = name.removesuffix(" (quiet step off)")
                        if base != name and seen.get(base) is not None:
                            same = seen[base] == got
                            print(f"{fname}: {base}: quiet step on and off "
                                  f"{'identical' if same else 'DIFFER'}")  # fmt: skip
                            out[f"{fname}: {base}: identical"] = same
                        seen[name] = got
                    out[f"{fname}: {name}{label}"] = {
                        "wall_s": wall, "max_s": max(m["wall"] for m in ms),
                        "cpu_s": cpu, "rss_mb": rss,
                        "x_floor": ratio, "x_floor_cpu": cpu_ratio, "exit": ms[0]["rc"],
                        "last_line": (ms[0]["out"].strip().splitlines() or [""])[-1][:200],
                    }  # fmt: skip
    # On a shared box, wall time follows the load of others: CPU seconds (the child's user +
    # system) against the floor's are the steadier comparison.
    heads = ["case", "wall s", "CPU s", "peak RSS MB", "x floor (wall)", "x floor (CPU)"]
    print(table(rows, heads))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=100_000, help="samples (2 GPU lines each)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--dir", default="/tmp", help="where the files are (made if missing)")
    ap.add_argument("--gz", action="store_true", help="also time the gzipped file")
    ap.add_argument("--csv", action="store_true", help="also time the nvidia-smi CSV")
    ap.add_argument("--hang-at", type=float, default=HANG_AT, help="where the hang starts (0-1)")
    ap.add_argument("--hang-s", type=float, default=HANG_S, help="how long it lasts, seconds")
    ap.add_argument("--json", default=None, metavar="PATH")
    ap.add_argument("--before", default=None, metavar="REV", help="also time the code at REV")
    ap.add_argument("--quiet-off", action="store_true",
                    help="also check with GPUTUI_REPLAY_QUIET=0, its output compared")  # fmt: skip
    args = ap.parse_args()
    print(machine_line(machine()), f"load {os.getloadavg()[0]:.1f}")
    globals().update(HANG_AT=args.hang_at, HANG_S=args.hang_s)  # samples() reads them
    name = f"gputui-foreign-2x{args.samples}"
    if (args.hang_at, args.hang_s) != (0.6, 600.0):
        name += f"-hang-at-{round(args.hang_at * 100)}pc-{args.hang_s:g}s"
    base = Path(args.dir) / name
    files = {"plain": base.with_suffix(".jsonl")}
    if args.gz:
        files["gzip"] = base.with_suffix(".jsonl.gz")
    if args.csv:
        files["csv"] = base.with_suffix(".csv")
    for kind, path in files.items():
        if not path.exists():
            t = time.perf_counter()
            (make_csv if kind == "csv" else make_jsonl)(path, args.samples)
            print(f"made {path} in {time.perf_counter() - t:.0f} s")
        print(f"{path}: {path.stat().st_size / 2**20:.1f} MiB, {2 * args.samples} GPU lines")
    hung_s = min(args.samples / HZ - 1, args.samples * args.hang_at / HZ + args.hang_s - 60)
    result = run(files, args.repeat, args.before, hung_s, args.quiet_off)
    write_json(args.json, "foreign_history", result)


if __name__ == "__main__":
    main()
