"""Host-list expansion (`--expect @F`, `fleet @F`): linear in the list's size, bounded.

Issue 34: a file holding the line `n[1-99999]` 1,000 times (11 KB) took 58 s in `merge
--expect @F`, each line expanding its 99,999 names again. The cases timed here:

- `repeated`: that file (99,999 hosts);
- `distinct`: `node[000001-099999]` one name a line, a real list at the MAX_HOSTS bound;
- `overlapping`: `n[1-99999]`, `n[2-99999]`, ... (different expressions, the same hosts),
  refused once MAX_GENERATED names were made;
- the whole `gputui merge --expect @F` command for `repeated` (start-up included).

    python bench/hostlist_cost.py [--repeat 5] [--before REV]

`--before REV` also times the hostlist module of git revision REV on the `repeated` case
cut to `--before-lines` lines (the old code is linear in lines times 99,999).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import ROOT, machine, machine_line, median, table, write_json  # noqa: E402


def _time(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        try:
            out = fn()
        except ValueError as e:
            out = f"refused: {e}"
        times.append(time.perf_counter() - t)
    return median(times), out


def _old_module(rev: str, tmp: Path):
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:gputui/collect/hostlist.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = tmp / "old_hostlist.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("old_hostlist", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(repeat: int = 5, before: str | None = None, before_lines: int = 50) -> dict:
    from gputui.collect.hostlist import expand_hosts

    rows, out = [], {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        files = {
            "repeated": "n[1-99999]\n" * 1000,
            "distinct": "".join(f"node{i:06d}\n" for i in range(1, 100_000)),
            "overlapping": "".join(f"n[{i}-99999]\n" for i in range(1, 1001)),
        }
        for name, text in files.items():
            path = tmp / name
            path.write_text(text)
            secs, res = _time(lambda p=path: expand_hosts(f"@{p}"), repeat)
            said = f"{len(res)} hosts" if isinstance(res, list) else str(res)[-60:]
            rows.append((name, len(text), secs, said))
            out[name] = {"bytes": len(text), "seconds": secs, "result": said}
        lines = tmp / "lines.jsonl"
        lines.write_text('{"t": 1, "state": "ok", "host": "n1"}\n')
        cmd = [sys.executable, "-m", "gputui", "merge", "--expect", f"@{tmp / 'repeated'}"]
        secs, _ = _time(
            lambda: subprocess.run([*cmd, str(lines)], capture_output=True, check=False), repeat
        )
        rows.append(("merge --expect @repeated", len(files["repeated"]), secs, "whole command"))
        out["merge_command_s"] = secs
        if before:
            old = _old_module(before, tmp)
            path = tmp / "old"
            path.write_text("n[1-99999]\n" * before_lines)
            secs, _ = _time(lambda: old.expand_hosts(f"@{path}"), 1)
            rows.append((f"before ({before}), {before_lines} lines", before_lines * 11, secs, ""))
            out["before"] = {"rev": before, "lines": before_lines, "seconds": secs}
    print(table(rows, ["case", "bytes", "seconds (median)", "result"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--before", default=None, metavar="REV")
    ap.add_argument("--before-lines", type=int, default=50)
    ap.add_argument("--json", default=None, metavar="PATH")
    args = ap.parse_args()
    print(machine_line(machine()))
    res = run(args.repeat, args.before, args.before_lines)
    write_json(args.json, "hostlist_cost", res)


if __name__ == "__main__":
    main()
