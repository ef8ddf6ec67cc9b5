"""What NCCL chose, read from the NCCL_DEBUG=INFO lines the world probe's ranks wrote.

Why: "all_reduce is slow between nodes" is often "NCCL used Socket instead of IB", because an
NCCL_* variable (NCCL_IB_DISABLE, NCCL_SOCKET_IFNAME, NCCL_NET) or a missing plugin changed
its choice. NCCL says so at INFO level; this module keeps the few lines that explain it: the
version, the network it used and over which interfaces, the transport per rank pair (P2P/NVLink,
SHM, NET/IB, NET/Socket) and the variables it reported as set by the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gputui.textsafe import clean

MAX_LOG_BYTES = 4 << 20  # per rank log
MAX_PAIRS = 256

_VERSION = re.compile(r"NCCL version ([0-9][0-9.]*[0-9](?:\+\S+)?)")
_NETWORK = re.compile(r"Using network (\S+)")
_USING = re.compile(r"NET/(IB|Socket)\s*:\s*Using (.+)$")
_IFACE = re.compile(r"\[\d+\]([A-Za-z0-9_.:\-]+?)(?::[0-9a-fA-F.:%]+)?(?:<\d+>|/\S+)?(?=\s|$)")
_CHANNEL = re.compile(
    r"Channel \d+(?:/\d+)? : (\d+)\[[0-9a-f]+\] -> (\d+)\[[0-9a-f]+\] (?:\[\w+\] )?via (\S+)"
)
_ENV = re.compile(r"(NCCL_[A-Z0-9_]+) set by environment to (.*?)\.?$")


def transport_kind(via: str) -> str:
    """'P2P/CUMEM/read' -> 'P2P', 'NET/IB/0/GDRDMA' -> 'NET/IB', 'SHM/direct/direct' -> 'SHM'."""
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        return f"NET/{parts[1]}"
    return parts[0]


def parse_lines(lines: Iterable[str]) -> dict[str, Any]:
    """The explanation from NCCL INFO lines (any number of ranks' logs, concatenated)."""
    out: dict[str, Any] = {
        "version": None,
        "network": None,
        "ifaces": [],
        "transports": {},
        "env": {},
    }
    for raw in lines:
        if "NCCL" not in raw:
            continue
        line = raw.rstrip()
        if m := _VERSION.search(line):
            out["version"] = out["version"] or m.group(1)
        if m := _NETWORK.search(line):
            out["network"] = m.group(1)
        if m := _USING.search(line):
            for name in _IFACE.findall(m.group(2)):
                tag = f"{name} ({m.group(1)})"
                if tag not in out["ifaces"]:
                    out["ifaces"].append(clean(tag, limit=60))
        if (m := _CHANNEL.search(line)) and len(out["transports"]) < MAX_PAIRS:
            key = f"{m.group(1)}->{m.group(2)}"
            out["transports"].setdefault(key, transport_kind(m.group(3)))
        if m := _ENV.search(line):
            out["env"][m.group(1)] = clean(m.group(2), limit=120)
    for k, v in os.environ.items():  # set here but not echoed by NCCL (it echoes only some)
        if k.startswith("NCCL_") and k not in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS"):
            out["env"].setdefault(k, clean(v, limit=120))
    return out


def parse_nccl_log(paths: list[Path]) -> dict[str, Any]:
    """parse_lines over every rank's stderr file, each read up to MAX_LOG_BYTES."""
    lines: list[str] = []
    for p in paths:
        try:
            with p.open("rb") as f:
                lines += f.read(MAX_LOG_BYTES).decode("utf-8", "replace").splitlines()
        except OSError:
            continue
    return parse_lines(lines)


def summary(nccl: dict[str, Any]) -> str:
    """One line: 'NCCL 2.21.5, network IB over mlx5_0 (IB); P2P x6, NET/IB x2; env ...'."""
    if not nccl:
        return ""
    kinds: dict[str, int] = {}
    for k in nccl.get("transports", {}).values():
        kinds[k] = kinds.get(k, 0) + 1
    parts = [f"NCCL {nccl.get('version') or '?'}"]
    if nccl.get("network"):
        ifaces = ", ".join(nccl.get("ifaces") or []) or "?"
        parts.append(f"network {nccl['network']} over {ifaces}")
    if kinds:
        parts.append("transports " + ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items())))
    env = nccl.get("env") or {}
    if env:
        parts.append("set: " + " ".join(f"{k}={v}" for k, v in sorted(env.items())))
    return "; ".join(parts)
