"""The hostile sweep's newer families (issue 34), each a list of runs to judge.

- `records`: the real recordings of tests/data (and the record types none carries yet,
  made by their writers: tests/recorded_records.py) with one field of one record given a
  hostile value (wrong type, null, huge, nested, escapes) or removed: `snapshot` and
  `check`, text and JSON; the record must be skipped with one line, never a traceback.
- `hostlists`: `merge --expect @F` with files that are not host lists (a fake shadow
  file, binary, a nested @file), the issue's `n[1-99999]` x 1,000, overlapping ranges,
  more hosts than the bound; refused or expanded in one line, no content quoted.
- `merge-lines`: check lines whose fields have the wrong shape, among good ones.
- `startup`: SIGINT at random moments of the first 60 ms of `snapshot --demo`, and
  `probe --size` with thousands of digits.

A run is (argv, stdin bytes or None, a judge); the judge gets (exit status, stdout, stderr,
hung) and returns (outcome, detail), outcome "clean error", "clean run" or a failure.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

Judge = Callable[[int | None, str, str, bool], tuple[str, str]]
Run = tuple[str, list[str], Judge]  # (case name, argv after `gputui`, judge)

SECRET_BITS = ("root:", "Zx9salt", "Qk2sEcReT", "alice")


def plain(expect_codes: tuple[int, ...] = (0, 1, 2, 3), quiet: tuple[str, ...] = ()) -> Judge:
    """No hang, no traceback, no crash; an exit 2 is one `gputui: ` line; none of `quiet`
    on either stream; stderr lines all begin `gputui: `."""

    def judge(rc: int | None, out: str, err: str, hung: bool) -> tuple[str, str]:
        if hung:
            return "hang", "ran past its bound"
        if rc == 5:
            return "crash", err.strip().splitlines()[-1] if err.strip() else "exit 5"
        if "Traceback (most recent call last)" in err or rc not in expect_codes:
            return "traceback", (err.strip().splitlines() or [f"exit {rc}"])[-1][:200]
        if any(q in out or q in err for q in quiet):
            return "wrong outcome", "quoted what it must not"
        if any(not ln.startswith("gputui") for ln in err.splitlines()):
            return "bad error line", err[:200]
        if rc == 2:
            if err.count("\n") != 1:
                return "bad error line", err[:200]
            return "clean error", err.strip()
        return "clean run", f"exit {rc}"

    return judge


def records(tmp: Path, per_type: int, seed: int = 34) -> Iterator[Run]:
    from recorded_records import DELETE, HOSTILE_VALUES, mutate, paths, recordings
    from recorded_records import records as all_records

    from gputui.collect.trace.record_schema import KINDS

    rnd = random.Random(seed)
    lines = recordings()
    recs = all_records(lines)
    for kind in KINDS:
        mine = [r for r in recs if r[2]["type"] == kind]
        if not mine:  # a type no recording of tests/data holds yet: nothing to damage
            print(f"records: no recorded '{kind}' record to damage; skipped", file=sys.stderr)
            continue
        for k in range(per_type):
            name, i, rec = rnd.choice(mine)
            path = rnd.choice(list(paths(rec)))
            value = rnd.choice([*HOSTILE_VALUES, DELETE])
            bad = mutate(rec, path, value)
            text = "\n".join([*lines[name][:i], json.dumps(bad), *lines[name][i + 1 :]]) + "\n"
            f = tmp / f"rec-{kind}-{k}.jsonl"
            f.write_text(text, encoding="utf-8", errors="surrogatepass")
            where = f"{kind}.{'.'.join(map(str, path))}"
            for cmd in (["snapshot"], ["snapshot", "--json"], ["check"], ["check", "--json"]):
                yield where, [*cmd, "--replay", str(f)], plain()


def hostlists(tmp: Path) -> Iterator[Run]:
    lines = tmp / "ok.jsonl"
    lines.write_text('{"t": 1, "state": "ok", "host": "node1"}\n')
    files: dict[str, str | bytes] = {
        "shadow": "root:$6$Zx9salt$Qk2sEcReT:19700:0:99999:7:::\nalice::19700:0:99999:7:::\n",
        "shadow_third_line": "node1\nnode2\nroot:$6$Zx9salt$Qk2sEcReT:19700:0:99999:7:::\n",
        "binary": b"\x7fELF\x02\x01\x01\x00\xff\xfe Qk2sEcReT\n",
        "nested": "node1\n@/etc/hostname\n",
        "repeated": "n[1-99999]\n" * 1000,
        "overlapping": "".join(f"n[{i}-99999]\n" for i in range(1, 1001)),
        "too_many": "a[1-60000]\nb[1-60000]\n",
        "options": "-oProxyCommand=touch /tmp/x\n",
        "unbalanced": "node[1-\n",
        "huge_range": "n[0-999999999999]\n",
        "escapes": "node\x1b]0;x\x07\n",
    }
    for name, content in files.items():
        f = tmp / f"hosts-{name}"
        f.write_bytes(content if isinstance(content, bytes) else content.encode())
        judge = plain((0, 1, 2), quiet=SECRET_BITS)
        yield f"hostlist.{name}", ["merge", "--expect", f"@{f}", str(lines)], judge
        if name != "repeated":  # refused before any host is reached (a list would be tried)
            yield f"hostlist.{name}", ["fleet", f"@{f}", "--timeout", "1", "--", "snapshot"], judge


MERGE_VALUES: tuple[Any, ...] = (5, "x", None, [], {}, [None], [{"a": 1}], True, 1e308, "\x1b[2J")
MERGE_FIELDS = (
    "t", "state", "host", "spinning", "suspects", "suspect_pids", "since", "reason",
    "job_key", "world_size", "ranks", "stacks", "culprit_frame", "findings", "health",
    "missing_ranks", "stragglers", "wait_share",
)  # fmt: skip


def merge_lines(tmp: Path) -> Iterator[Run]:
    good = {"t": 2.0, "state": "stalled", "host": "b", "spinning": [0], "ranks": {"0": 1}}
    for field in MERGE_FIELDS:
        for k, value in enumerate(MERGE_VALUES):
            f = tmp / f"merge-{field}-{k}.jsonl"
            bad = {**good, field: value, "host": "c"}
            f.write_text(
                json.dumps({"t": 1.0, "state": "ok", "host": "a"}) + "\n" + json.dumps(bad) + "\n"
            )
            yield f"merge.{field}={value!r:.20}", ["merge", str(f)], plain((0, 1))
            yield f"merge.{field}={value!r:.20}", ["merge", "--json", str(f)], plain((0, 1))


def startup(n: int, seed: int = 34) -> Iterator[tuple[str, list[str], Judge, float]]:
    """(name, argv, judge, SIGINT delay in seconds) runs; the delay is where it lands."""
    rnd = random.Random(seed)
    for _ in range(n):
        d = rnd.uniform(0.0, 0.06)
        yield f"sigint@{d * 1000:.0f}ms", ["snapshot", "--demo"], plain((0, 130)), d
    for digits in (400, 5000, 100_000):
        yield f"probe --size {digits} digits", ["probe", "--size", "9" * digits], plain((2,)), -1
