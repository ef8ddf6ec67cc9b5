"""Scrapes answered while slow clients hold connections to a real `gputui exporter`.

    python bench/exporter_slow_clients.py [--clients 4 50 200] [--seconds 6] [--pace 0.2]
                                          [--pythonpath DIR]

Starts `gputui exporter --demo --loop` on a free port, and for each count N keeps N
sockets trickling one byte of a request every PACE seconds (reconnecting when closed, as an
attacker does) while scraping /metrics four times a second. Prints, per N: scrapes
answered / tried, the slowest, and how often the attackers were closed and came back.
`--pythonpath DIR` measures another checkout (e.g. /work/main) the same way.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from slow_clients import SlowClients, scrape_while  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, nargs="+", default=[4, 50, 200])
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--pace", type=float, default=0.2)
    ap.add_argument("--pythonpath", default=str(ROOT))
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": args.pythonpath}
    cmd = [sys.executable, "-m", "gputui", "exporter", "--demo", "--loop"]
    proc = subprocess.Popen(
        [*cmd, "--listen", "127.0.0.1:0"],
        cwd=args.pythonpath,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        if "serving " not in line:
            print(f"the exporter did not start: {line.strip()}", file=sys.stderr)
            return 2
        url = line.split("serving ", 1)[1].split()[0]
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        print(f"{'slow clients':>12}  {'answered':>9}  {'slowest':>8}  reconnects")
        for n in args.clients:
            with SlowClients(port, n, pace=args.pace) as slow:
                time.sleep(args.pace * 2)  # every attacker has sent a byte or two
                lat = scrape_while(url, args.seconds)
            ok = [v for v in lat if v is not None]
            worst = f"{max(ok):.3f} s" if ok else "-"
            print(f"{n:>12}  {len(ok):>4}/{len(lat):<4}  {worst:>8}  {slow.reconnects}")
    finally:
        proc.kill()
        proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
