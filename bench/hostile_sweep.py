"""Every hostile recording through the four read-only commands, as real subprocesses.

    python bench/hostile_sweep.py [--bound S] [--jobs N] [--pythonpath DIR] [--json PATH]
    python bench/hostile_sweep.py --families records,hostlists,merge-lines,startup
    python bench/hostile_sweep.py --families round4   # issue 43: trust, time, files, text

The `corpus` family (the default) generates the corpus of tests/hostile_corpus.py (about
560 damaged files: every example of issue 11 and, field by field, what a file can carry),
runs `snapshot`, `snapshot --json`, `check` and `check --json` on each with a time bound,
and prints the issue's table re-measured: tries, clean errors (exit 2, one line), clean
runs, and failures (tracebacks, hangs past the bound, invalid JSON on stdout, an error that
is not one line, a file accepted that should be refused or the reverse).

`--pythonpath DIR` runs another checkout's gputui (e.g. /work/main) on the same corpus, to
measure before and after. The other families (issue 34: records of the wrong shape, host
lists that are not, merged check lines of the wrong shape, Ctrl-C during start-up and
`probe --size` of thousands of digits) are in bench/hostile_families.py; issue 43's (a fake
RAS listener of another user, a trickling debug server, bundles through links, the flight
recorder's dump paths, zero-width and bidi marks, endless input to `merge`) in
bench/hostile_round4.py (`--families round4`, or one of them by name).
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from hostile_corpus import Case, corpus, materialize  # noqa: E402
from hostile_harness import COMMANDS, FAILURES, judge  # noqa: E402


def run_one(
    case: Case, path: str, cmd: tuple[str, ...], bound: float, env: dict[str, str]
) -> tuple[str, str, float]:
    """(outcome, detail, seconds) of one subprocess run, killed (with its group) at `bound`."""
    start = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "gputui", *cmd, "--replay", path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=env,
        cwd=tempfile.gettempdir(),  # not the checkout: `-m` puts the cwd first on sys.path
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=bound)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        hung = True
    outcome, detail = judge(case, cmd, p.returncode, out, err, hung)
    return outcome, detail, time.monotonic() - start


def run_argv(
    argv: list[str], judge, bound: float, env: dict[str, str], sigint_after: float = -1.0
) -> tuple[str, str, float]:
    """(outcome, detail, seconds) of `gputui ARGV` as a subprocess; with `sigint_after` >=
    0, a SIGINT is sent that many seconds after it starts."""
    start = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "gputui", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=env,
        cwd=tempfile.gettempdir(),
        start_new_session=True,
    )
    if sigint_after >= 0:
        time.sleep(sigint_after)  # where the interrupt lands: the point of the run
        try:
            p.send_signal(signal.SIGINT)
        except ProcessLookupError:
            pass
    try:
        out, err = p.communicate(timeout=bound)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        hung = True
    outcome, detail = judge(p.returncode, out, err, hung)
    if sigint_after >= 0 and outcome == "traceback" and "/gputui/" not in err:
        outcome = "python start-up"  # before any of gputui's code ran (site.py): Python's
    return outcome, detail, time.monotonic() - start


def families(names: list[str], tmp: Path, args: argparse.Namespace, env: dict[str, str]):
    """The results of the issue-34 families: [(family, name, argv, (outcome, detail, s))]."""
    import hostile_families as fam

    jobs: list[tuple[str, str, list[str], object, float]] = []
    if "records" in names:
        jobs += [("records", n, a, j, -1.0) for n, a, j in fam.records(tmp, args.per_type)]
    if "hostlists" in names:
        jobs += [("hostlists", n, a, j, -1.0) for n, a, j in fam.hostlists(tmp)]
    if "merge-lines" in names:
        jobs += [("merge-lines", n, a, j, -1.0) for n, a, j in fam.merge_lines(tmp)]
    if "startup" in names:
        jobs += [("startup", n, a, j, d) for n, a, j, d in fam.startup(args.sigints)]
    if args.only is not None:  # a family's run is named for what it damaged: `debugserver.ranks`
        jobs = [j for j in jobs if args.only in j[1]]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        return list(
            pool.map(
                lambda j: (j[0], j[1], j[2], run_argv(j[2], j[3], args.bound, env, j[4])), jobs
            )
        )


def round4(names: list[str], tmp: Path, args: argparse.Namespace) -> int:
    """Issue 43's families (bench/hostile_round4.py): tries, held, failed per family."""
    import hostile_round4 as r4

    jobs = r4.tries(names, tmp, args.round4_n, args.bound)
    if args.only is not None:
        jobs = [j for j in jobs if args.only in j[1][0]]
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(lambda j: (j[0], j[1][0], r4.run_try(j[1])), jobs))
    print(f"round four: {len(results)} tries, wall {time.monotonic() - start:.0f} s\n")
    by: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    failed: list[str] = []
    slowest: dict[str, float] = collections.defaultdict(float)
    for family, name, (outcome, detail, secs) in results:
        by[family][outcome] += 1
        slowest[family] = max(slowest[family], secs)
        if outcome != r4.HELD:
            failed.append(f"{name}: {outcome}: {detail[:160]}")
    print("| family | tries | held | failed | slowest try |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for family, t in by.items():
        n = sum(t.values())
        print(f"| {family} | {n} | {t[r4.HELD]} | {n - t[r4.HELD]} | {slowest[family]:.1f} s |")
    for line in failed[:20]:
        print(f"  {line}")
    return len(failed)


def report_families(results) -> int:
    fails = (*FAILURES, "python start-up")
    by: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    examples: dict[str, list[str]] = collections.defaultdict(list)
    for family, name, argv, (outcome, detail, _s) in results:
        by[family][outcome] += 1
        if outcome in fails:
            examples[f"{family}: {outcome}"].append(f"{name} [{argv[0]}]: {detail[:160]}")
    print("| family | runs | clean errors | clean runs | failures | Python's start-up |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    total = 0
    for family, t in by.items():
        n = sum(t[f] for f in FAILURES)
        total += n
        print(
            f"| {family} | {sum(t.values())} | {t['clean error']} | {t['clean run']} | {n} "
            f"| {t['python start-up']} |"
        )
    for k, lines in examples.items():
        print(f"\n{k} ({len(lines)}):")
        for line in lines[:12]:
            print(f"  {line}")
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bound", type=float, default=30.0, help="seconds per run (default 30)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (default 2)")
    ap.add_argument("--pythonpath", default=None, help="gputui checkout to run instead")
    ap.add_argument(
        "--only", default=None, help="only cases (or family runs) whose name contains this"
    )
    ap.add_argument("--json", default=None, metavar="PATH", help="also write results as JSON")
    ap.add_argument(
        "--families",
        default="corpus",
        help="corpus,records,hostlists,merge-lines,startup; round4 (or ras-trust, "
        "slow-server, bundle-links, fr-files, text-marks, endless)",
    )
    ap.add_argument("--per-type", type=int, default=40, help="records: damaged files per type")
    ap.add_argument("--sigints", type=int, default=60, help="startup: interrupted starts")
    ap.add_argument(
        "--round4-n", type=int, default=100, help="round4: tries of the random families"
    )
    args = ap.parse_args()

    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    names = args.families.split(",")
    import hostile_round4

    if "round4" in names:
        names = [*names, *hostile_round4.FAMILIES]
    fours = [n for n in names if n in hostile_round4.FAMILIES]
    if fours:
        with tempfile.TemporaryDirectory(prefix="gputui-hostile-") as tmp:
            failed = round4(fours, Path(tmp), args)
        names = [n for n in names if n not in (*fours, "round4")]
        if not names:
            return 1 if failed else 0
    if names != ["corpus"]:
        with tempfile.TemporaryDirectory(prefix="gputui-hostile-") as tmp:
            start = time.monotonic()
            results = families(names, Path(tmp), args, env)
            print(f"gputui: {args.pythonpath or ROOT}  wall {time.monotonic() - start:.0f} s\n")
            failures = report_families(results)
        if "corpus" not in names:
            return 1 if failures else 0
    cases = [c for c in corpus() if args.only is None or args.only in c.name]
    with tempfile.TemporaryDirectory(prefix="gputui-hostile-") as tmp:
        made = materialize(cases, Path(tmp))
        jobs = [(c, p, cmd) for c, p in made for cmd in COMMANDS]
        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(lambda j: (j, run_one(*j, args.bound, env)), jobs))
        wall = time.monotonic() - start

    tally: collections.Counter[str] = collections.Counter()
    by_cmd: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    examples: dict[str, list[str]] = collections.defaultdict(list)
    slowest = max(results, key=lambda r: r[1][2])
    for (case, _path, cmd), (outcome, detail, _s) in results:
        tally[outcome] += 1
        by_cmd[" ".join(cmd)][outcome] += 1
        if outcome in FAILURES:
            examples[outcome].append(f"{case.name} [{' '.join(cmd)}]: {detail[:160]}")

    failures = sum(tally[f] for f in FAILURES)
    print(f"gputui: {args.pythonpath or ROOT}  files: {len(cases)}  bound: {args.bound:g} s")
    print()
    print("| command | tries | clean errors | clean runs | failures |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for cmd, t in by_cmd.items():
        fails = sum(t[f] for f in FAILURES)
        print(f"| `{cmd}` | {sum(t.values())} | {t['clean error']} | {t['clean run']} | {fails} |")
    print(
        f"| **all** | {len(results)} | {tally['clean error']} | {tally['clean run']} | {failures} |"
    )
    print()
    print("| failure | runs |")
    print("| --- | ---: |")
    for f in FAILURES:
        print(f"| {f} | {tally[f]} |")
    (case, _p, cmd), (_o, _d, secs) = slowest
    print()
    print(f"wall {wall:.0f} s; slowest run {secs:.2f} s ({case.name}, {' '.join(cmd)})")
    for outcome, lines in examples.items():
        print(f"\n{outcome} ({len(lines)}):")
        for line in lines[:12]:
            print(f"  {line}")
    if args.json:
        import json

        Path(args.json).write_text(
            json.dumps(
                {
                    "files": len(cases),
                    "runs": len(results),
                    "tally": dict(tally),
                    "by_command": {k: dict(v) for k, v in by_cmd.items()},
                    "failures": {k: v for k, v in examples.items()},
                },
                indent=2,
            )
        )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
