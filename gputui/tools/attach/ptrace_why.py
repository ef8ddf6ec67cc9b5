"""Why ptrace was refused to root: the reasons "run gputui with sudo" cannot fix.

As root with CAP_SYS_PTRACE and a ptrace_scope that allows it, a refusal still happens: the
target lives in another namespace (outside gputui's container or sandbox, where root here is
not root), gputui runs under a seccomp filter, a security module confines it, or the target
holds capabilities gputui does not. Each is read from /proc, so the message names the one
that holds on this machine instead of advice the user has already followed.
"""

from __future__ import annotations

import os

_CAP_NAMES = {
    0: "CAP_CHOWN",
    1: "CAP_DAC_OVERRIDE",
    12: "CAP_NET_ADMIN",
    19: "CAP_SYS_PTRACE",
    21: "CAP_SYS_ADMIN",
    24: "CAP_SYS_RESOURCE",
    25: "CAP_SYS_TIME",
    38: "CAP_PERFMON",
    39: "CAP_BPF",
}


def _status_field(pid: int | str, name: str) -> str | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _ns(pid: int | str, kind: str) -> str | None:
    """The namespace link (e.g. `user:[4026531837]`); PermissionError when hidden."""
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except PermissionError:
        raise
    except OSError:
        return None


def _caps(pid: int | str) -> int | None:
    v = _status_field(pid, "CapPrm")
    try:
        return int(v, 16) if v else None
    except ValueError:
        return None


def _cap_names(bits: int) -> str:
    names = [_CAP_NAMES.get(i, f"capability {i}") for i in range(64) if bits >> i & 1]
    return ", ".join(names[:4]) + (" …" if len(names) > 4 else "")


def root_refusal_reasons(pid: int) -> list[str]:
    """What stops root (with CAP_SYS_PTRACE) from attaching to `pid`, strongest first."""
    reasons: list[str] = []
    try:
        mine, theirs = _ns("self", "user"), _ns(pid, "user")
        if mine and theirs and mine != theirs:
            reasons.append(
                f"process {pid} is in another user namespace ({theirs}, gputui: {mine}): "
                "root here has no CAP_SYS_PTRACE there; run gputui in that namespace "
                "(e.g. inside the job's container)"
            )
        elif _ns("self", "pid") != _ns(pid, "pid"):
            reasons.append(
                f"process {pid} is in another PID namespace: run gputui inside the job's "
                "container, or on the host with the host's pid"
            )
    except PermissionError:
        reasons.append(
            f"the kernel hides process {pid}'s namespaces from gputui: it runs outside "
            "gputui's container or sandbox, where root here is not root; run gputui where "
            "the process runs"
        )
    seccomp = _status_field("self", "Seccomp")
    if seccomp not in (None, "0"):
        reasons.append(
            f"gputui runs under a seccomp filter (Seccomp: {seccomp}), which may forbid "
            "ptrace: Docker `--security-opt seccomp=unconfined`, or a profile that allows it"
        )
    try:
        with open("/proc/self/attr/current") as f:
            label = f.read().strip().rstrip("\x00")
    except OSError:
        label = ""
    if label and label not in ("unconfined", "kernel") and not label.endswith("unconfined_t"):
        reasons.append(f"a security module confines gputui ({label}): its policy may forbid ptrace")
    mine_caps, their_caps = _caps("self"), _caps(pid)
    if mine_caps is not None and their_caps is not None and their_caps & ~mine_caps:
        reasons.append(
            f"process {pid} holds capabilities gputui lacks ({_cap_names(their_caps & ~mine_caps)})"
        )
    if not reasons:
        reasons.append(
            "gputui runs as root with CAP_SYS_PTRACE and ptrace_scope allows it, so a "
            "security module (AppArmor, SELinux, Landlock) or the sandbox gputui runs in "
            "refused it"
        )
    return reasons
