"""Time to the first frame with data and to the full dashboard, in a pseudo-terminal.

    python scripts/device/full_frame.py --starts 5 -- python3 -m gputui

"first": the first output with a power figure (`122/700W`: gputui's plain-text frame, drawn
before Textual loads); "full": the first output with the process table's heading (Textual's
dashboard). Median of --starts starts; each start is ended with SIGTERM once both are seen.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import re
import select
import signal
import statistics
import struct
import termios
import time

ESC = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def once(argv: list[str], full: bytes, cols: int, rows: int, limit: float) -> tuple[float, float]:
    t0 = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    buf, first, whole = b"", float("nan"), float("nan")
    while time.monotonic() - t0 < limit:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if not ready:
            continue
        try:
            buf += os.read(fd, 65536)
        except OSError:
            break
        text = ESC.sub(b"", buf)
        if first != first and re.search(rb"\d+/\d+ ?W", text):
            first = time.monotonic() - t0
        if full in text:
            whole = time.monotonic() - t0
            break
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)
    os.close(fd)
    return first, whole


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--full", default="RANK")
    ap.add_argument("--size", default="160x50")
    ap.add_argument("--limit", type=float, default=20.0)
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cols, rows = (int(x) for x in a.size.split("x"))
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    runs = [once(argv, a.full.encode(), cols, rows, a.limit) for _ in range(a.starts)]
    firsts, fulls = [r[0] for r in runs], [r[1] for r in runs]
    print(json.dumps({"argv": argv, "first": firsts, "full": fulls}))
    print(
        f"{' '.join(argv)}: first frame median {statistics.median(firsts):.3f} s, "
        f"full dashboard median {statistics.median(fulls):.3f} s"
    )


if __name__ == "__main__":
    main()
