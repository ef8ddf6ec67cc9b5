"""What redaction costs, and that it stays linear on hostile input.

Every line a tool prints and every command line the sampler reads goes through
gputui.redact, so two figures matter:

- typical cost: microseconds per line of real-looking tool output (py-spy, gdb, strace,
  half of it carrying a secret), per command line (`redact_argv`) and per environment of
  60 variables (`redact_env`); of the by-shape part alone (the key formats, AWS context,
  PEM, random tokens: `format_spans`) per tool line; and per sample of a table of 40
  process rows: all 40 command lines new (redacted, the worst case: live, a process is
  redacted once when first seen) and all 40 already seen (a replay's cache); and a
  recording's stack dump record (8 ranks x 60 frames) whose strings are all new;
  median over --repeat rounds, CPU time;
- hostile input: a process controls its own command line (up to 128 KiB per argument), so a
  crafted argument must not stall the sampler. For each pattern, the time for a 100 KiB and
  a 1 MiB string: linear code takes ~10 x as long for 10 x the size.

    python bench/redact_cost.py [--repeat 7] [--json out/redact.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

from common import machine, machine_line, median, table, write_json

from gputui.redact import redact_argv, redact_env, redact_text
from gputui.redact.formats import format_spans
from gputui.redact.recorded import recorded_argv, recorded_record

TOOL_LINES = [
    'Thread 23005 (idle): "MainThread"',
    "    all_reduce (torch/distributed/distributed_c10d.py:2806)",
    "Process 4242: python train.py --pw hunter2 -phunter3 --lr 0.1 --epochs 3",
    "#1  __futex_abstimed_wait_common (futex_word=futex_word@entry=0x7f3430000bf0, "
    "expected=expected@entry=0, clockid=clockid@entry=1, private=<optimized out>) at "
    "./nptl/futex-internal.c:87",
    '#1  0x00007f in connect (url=0x5555 "postgres://u:pw@h/db", password=0x55 "x") at c.c:4',
    "#12 0x00007f0c in ncclDevKernel_AllReduce_Sum_f32_RING_LL () from /usr/lib/libnccl.so.2",
    "[pid 23006] 13:54:18.379548 futex(0x7f3430000bf0, FUTEX_WAIT_BITSET_PRIVATE, 0, "
    "{tv_sec=1920, tv_nsec=997037771}, FUTEX_BITSET_MATCH_ANY) = -1 ETIMEDOUT",
    '[pid 23006] 13:54:18.3791 sendto(4, "password=plnt61mN4bV7cX1zL8kJ5h", 31, 0, NULL, 0) = 31',
    '[pid 23006] 13:54:18.3793 write(3, "\\1\\2token=plnt62Qe8Rt2Yu6Io4Pa\\177", 29) = 29',
    '[pid 23278] 13:54:18.4145 execve("/bin/true", ["mysql", "-pplnt64Xk9", "--password", '
    '"plnt65aP3n"], 0x7fff63b30348 /* 69 vars */ <unfinished ...>',
]
ARGV = (
    "torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint node17:29400 train.py --config "
    "configs/llama-7b.yaml --hf-token hf_abcdefghijklmnopqrstuvwxyzABCDEFGH --lr 3e-4 "
    "--db postgres://u:pw@db/x --max-new-tokens 256"
).split()
ENV = {f"VAR_{i}": f"/opt/path/{i}:/usr/lib/{i}" for i in range(50)}
ENV.update(
    {
        "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "DATABASE_URL": "postgres://trainer:pw@db:5432/runs",
        "APP_CONFIG": '{"db": {"password": "x"}, "api_key": "y"}',
        "NCCL_IB_HCA": "mlx5_0:1,mlx5_1:1",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    }
)
ENV.update({f"NCCL_X_{i}": str(i) for i in range(5)})


def stacks_record(k: int) -> dict[str, Any]:
    """A stack dump record of 8 ranks x 60 frames, every string new (`k` differs): what
    `recorded_record` costs when its cache cannot help."""
    site = "/opt/conda/lib/python3.11/site-packages/torch"
    ranks = [
        {
            "pid": 100 + r,
            "rank": r,
            "outcome": "done",
            "frames": [[f"fn_{k}_{r}_{i}", f"{site}/m_{k}_{r}_{i}.py", i] for i in range(60)],
        }
        for r in range(8)
    ]
    return {"type": "stacks", "t": float(k), "job": "master:10.0.0.1:29500", "ranks": ranks}


_FRESH = itertools.count(1)

# A sample's process table: 40 rows, each its own command line (a rank index differs).
ROWS = [tuple(ARGV) + ("--local-rank", str(i)) for i in range(40)]

HOSTILE: dict[str, str] = {
    "letters": "a",
    "dashes": "-",
    "quotes": '"',
    "escapes": "\\x41",
    "url schemes": "a://",
    "url userinfo": "a://u:p@",
    "name=": "a=",
    "password=": "password=",
    "password:": "password:",
    "open brackets": "password=[",
    "json keys": '{"password": ',
    "--pw flags": "--pw ",
    "-p flags": "-p ",
    "argv arrays": '["-p", ',
    "gdb args": 'password=0x1 "',
    "base64": "Ab1+",
    "base64 with /": "Ab1/",
    "key prefixes": "sk-AKIA",
    "AWS context": "AKIAIOSFODNN7EXAMPL0 ",
    "Azure Q~": "ab1Q~",
    "JWT parts": "eyJa.",
}


def cpu_us(fn: Callable[[], Any], n: int, repeat: int) -> float:
    rounds = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        rounds.append((time.process_time() - t) / n * 1e6)
    return median(rounds)


def run(repeat: int = 7, sizes: tuple[int, int] = (100_000, 1_000_000)) -> dict[str, Any]:
    lines = TOOL_LINES * 100
    typical = {
        "tool line us": cpu_us(lambda: [redact_text(ln) for ln in lines], len(lines), repeat),
        "argv us": cpu_us(lambda: [redact_argv(ARGV) for _ in range(200)], 200, repeat),
        "env us": cpu_us(lambda: [redact_env(ENV) for _ in range(50)], 50, repeat),
        "env vars": len(ENV),
        "shape us": cpu_us(lambda: [list(format_spans(ln)) for ln in lines], len(lines), repeat),
        "rows new ms": cpu_us(lambda: [redact_argv(a) for a in ROWS], 1, repeat) / 1e3,
        "rows seen ms": cpu_us(lambda: [recorded_argv(a) for a in ROWS], 1, repeat) / 1e3,
        "record ms": cpu_us(lambda: recorded_record(stacks_record(next(_FRESH))), 1, repeat) / 1e3,
        "record kb": len(json.dumps(stacks_record(0))) / 1e3,
    }
    hostile = []
    for name, unit in HOSTILE.items():
        row: dict[str, Any] = {"pattern": name}
        for size in sizes:
            text = unit * (size // len(unit))
            t = time.process_time()
            redact_text(text)
            row[f"{size // 1000} KB ms"] = (time.process_time() - t) * 1e3
        a, b = (row[f"{s // 1000} KB ms"] for s in sizes)
        row["ratio"] = b / a if a > 0 else None
        hostile.append(row)
    return {"typical": typical, "hostile": hostile}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", metavar="PATH")
    a = ap.parse_args()
    res = run(a.repeat)
    print(machine_line(machine()))
    t = res["typical"]
    print(
        table(
            [
                ("tool output line", t["tool line us"]),
                ("command line (redact_argv)", t["argv us"]),
                (f"environment of {t['env vars']} variables", t["env us"]),
                ("by shape alone, per tool line (format_spans)", t["shape us"]),
                ("a sample's 40 process rows, all new (ms)", t["rows new ms"]),
                ("a sample's 40 process rows, seen before (ms)", t["rows seen ms"]),
                (
                    f"a recorded stacks record, {t['record kb']:.0f} KB, all new (ms)",
                    t["record ms"],
                ),
            ],
            ["redaction, typical", "CPU us each (median)"],
        )
    )
    print()
    heads = list(res["hostile"][0])
    print(table([[r[h] for h in heads] for r in res["hostile"]], heads))
    write_json(a.json, "redact_cost", res)


if __name__ == "__main__":
    main()
