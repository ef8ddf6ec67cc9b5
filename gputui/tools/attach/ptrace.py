"""Before and after attaching: is this the process the user saw, may we attach, is it running?

- Identity: a pid is only the process the user saw while its create time matches; a recycled
  pid must never be attached to, and a process from a recording is not on this machine.
- Permission: a raw EPERM helps nobody; the advice depends on who we are, who owns the
  target, kernel.yama.ptrace_scope and whether we hold CAP_SYS_PTRACE (containers drop it).
- State: an attach that is killed at the wrong moment can leave the target in group-stop
  (state T). Every run ends by reading the target's state and sending SIGCONT when we may
  have left it stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import psutil

from gputui.collect.model import ProcessInfo
from gputui.tools.result import Outcome

CAP_SYS_PTRACE = 19
PTRACE_SCOPE_FILE = "/proc/sys/kernel/yama/ptrace_scope"
_SAME_START_S = 0.05  # create times are computed from clock ticks: allow rounding only

STATE_NAMES = {
    "R": "running",
    "S": "sleeping",
    "D": "disk sleep",
    "T": "stopped",
    "t": "tracing stop",
    "Z": "zombie",
    "X": "dead",
    "I": "idle",
    "P": "parked",
}


@dataclass(frozen=True)
class Target:
    """The process to act on: a pid and, when known, the create time the user saw."""

    pid: int
    create_time: float | None = None
    live: bool = True

    @classmethod
    def of(cls, t: int | ProcessInfo | Target) -> Target:
        if isinstance(t, Target):
            return t
        if isinstance(t, ProcessInfo):
            return cls(t.pid, t.create_time, t.live)
        return cls(int(t))


# ---------------------------------------------------------------- identity


def preflight(target: Target) -> tuple[Outcome, str] | None:
    """Why not to attach to `target` (an outcome and a one-line message), or None if fine.

    Args:
        target: the process to attach to.

    Returns:
        (outcome, message) when it must not be attached to (from a recording, exited, a zombie, its
        pid reused, a kernel thread), else None.
    """
    pid = target.pid
    if not target.live:
        return (
            Outcome.REFUSED,
            f"process {pid} is from a recording; it is not running on this machine",
        )
    try:
        p = psutil.Process(pid)
        ct = p.create_time()
        status = p.status()
    except psutil.NoSuchProcess:
        return Outcome.GONE, f"process {pid} is not running (it has exited)"
    except psutil.Error as e:  # AccessDenied on create time is unusual: /proc/PID/stat is public
        return Outcome.FAILED, f"cannot read process {pid}: {type(e).__name__}"
    if target.create_time is not None and abs(ct - target.create_time) > _SAME_START_S:
        started = datetime.fromtimestamp(ct).strftime("%H:%M:%S")
        return (
            Outcome.REFUSED,
            f"pid {pid} now belongs to another process (started {started}); the process "
            "you selected has exited, so gputui will not attach to this one",
        )
    if status == psutil.STATUS_ZOMBIE:
        return Outcome.GONE, f"process {pid} has exited (a zombie its parent has not reaped)"
    if is_kernel_thread(pid):
        name = _comm(pid)
        return (
            Outcome.REFUSED,
            f"process {pid}{f' ({name})' if name else ''} is a kernel thread: it has no "
            "user-space stack to dump",
        )
    return None


PF_KTHREAD = 0x00200000  # include/linux/sched.h: "I am a kernel thread"


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name ([0] is the state letter)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return []
    return data.rpartition(")")[2].split()  # the command name may hold spaces and ')'


def is_kernel_thread(pid: int) -> bool:
    """True for a kernel thread (kthreadd, kworker...): PF_KTHREAD in the flags field of
    /proc/PID/stat (field 9). Such a thread has no user-space memory, so py-spy and gdb can
    only fail on it, with messages that look like the process has exited."""
    rest = _stat_fields(pid)
    try:
        return bool(int(rest[6]) & PF_KTHREAD)
    except (IndexError, ValueError):
        return False


def _comm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            name = f.read(64).decode("utf-8", "replace").strip()
    except OSError:
        return None
    return name if name.isprintable() else None


def still_same(target: Target) -> bool:
    """True while the pid exists, is not a zombie, and (if known) has the same create time."""
    try:
        p = psutil.Process(target.pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        return target.create_time is None or abs(p.create_time() - target.create_time) <= (
            _SAME_START_S
        )
    except psutil.Error:
        return False


# ---------------------------------------------------------------- permission


def ptrace_scope(path: str = PTRACE_SCOPE_FILE) -> int | None:
    """kernel.yama.ptrace_scope (0-3), or None when Yama is not in this kernel."""
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def has_cap_sys_ptrace(status_path: str = "/proc/self/status") -> bool | None:
    """Whether this process holds CAP_SYS_PTRACE (CapEff bit 19); None when unreadable."""
    try:
        with open(status_path) as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def _owner(pid: int) -> tuple[int | None, str | None]:
    try:
        p = psutil.Process(pid)
        uid = p.uids().real
        try:
            return uid, p.username()
        except (psutil.Error, KeyError):
            return uid, str(uid)
    except psutil.Error:
        return None, None


def permission_advice(
    pid: int,
    tool: str,
    *,
    scope: int | None | str = "read",
    has_cap: bool | None | str = "read",
    euid: int | None = None,
    target_uid: int | None | str = "read",
    target_user: str | None = None,
) -> str:
    """One line saying why ptrace was refused and what to do. Arguments default to reading
    this machine; tests pass them to cover every case without being unprivileged.

    Args:
        pid: the process ptrace was refused on.
        tool: the tool that was refused (`py-spy`, `gdb`...).
        scope: /proc/sys/kernel/yama/ptrace_scope; "read": read it here.
        has_cap: whether gputui holds CAP_SYS_PTRACE; "read": read it here.
        euid: gputui's effective uid; None: os.geteuid().
        target_uid: the process's uid; "read": read it here.
        target_user: the process's user name, with a given `target_uid` ("read" reads both).

    Returns:
        One line: why, and what to do (sudo, the capability, the scope).
    """
    scope_v = ptrace_scope() if scope == "read" else scope
    cap_v = has_cap_sys_ptrace() if has_cap == "read" else has_cap
    me = os.geteuid() if euid is None else euid
    if target_uid == "read":
        t_uid, t_user = _owner(pid)
    else:
        t_uid, t_user = target_uid, target_user  # type: ignore[assignment]
    fixes: list[str] = []
    if me != 0 and t_uid is not None and t_uid != me:
        fixes.append(f"it runs as {t_user or t_uid}: run gputui as that user or with sudo")
    if scope_v == 3:
        fixes.append("kernel.yama.ptrace_scope=3 forbids ptrace until reboot on this node")
    elif scope_v == 2:
        fixes.append("kernel.yama.ptrace_scope=2 allows attaching only as root: use sudo")
    elif scope_v == 1 and me != 0:
        fixes.append(
            "kernel.yama.ptrace_scope=1 lets users attach only to their own children: "
            "use sudo, or `sudo sysctl kernel.yama.ptrace_scope=0`"
        )
    if cap_v is False and me == 0:
        fixes.append(
            "gputui runs as root but without CAP_SYS_PTRACE (a container?): start it with "
            "`--cap-add SYS_PTRACE` (Kubernetes: securityContext.capabilities.add SYS_PTRACE)"
        )
    if not fixes and me == 0 and cap_v and euid is None:
        from gputui.tools.attach.ptrace_why import root_refusal_reasons

        fixes = root_refusal_reasons(pid)  # sudo cannot help root: name what does
    if not fixes:
        fixes.append(
            "run gputui with sudo; in a container add `--cap-add SYS_PTRACE`; "
            "if kernel.yama.ptrace_scope is 1, `sudo sysctl kernel.yama.ptrace_scope=0`"
        )
    return f"{tool} may not attach to process {pid} (ptrace refused): " + "; ".join(fixes)


# ---------------------------------------------------------------- state


def state_letter(pid: int) -> str | None:
    """The state letter in /proc/PID/stat (R, S, D, T, t, Z...), None when the pid is gone."""
    rest = _stat_fields(pid)
    return rest[0] if rest else None


def describe_state(letter: str | None) -> str:
    if letter is None:
        return "gone"
    return f"{STATE_NAMES.get(letter, 'unknown')} ({letter})"


def tracer_pid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def held_by(pid: int) -> str | None:
    """`pid N (name)` of the tracer holding `pid`, or None. A process has one tracer at a
    time: while a debugger, strace or another py-spy (a second gputui) holds it, every
    attach is refused with EPERM, whatever our privileges."""
    tp = tracer_pid(pid)
    if tp <= 0:
        return None
    name = _comm(tp)
    return f"pid {tp}" + (f" ({name})" if name else "")


def wait_untraced(pid: int, budget_s: float, cancel: object | None = None) -> bool:
    """Wait up to `budget_s` for `pid` to have no tracer (py-spy holds one for ~20 ms)."""
    end = time.monotonic() + budget_s
    while tracer_pid(pid) > 0:
        if time.monotonic() >= end or (cancel is not None and cancel.is_set()):  # type: ignore[attr-defined]
            return False
        time.sleep(0.02)
    return True


def settle(target: Target, stopped_before: bool, killed: bool) -> str | None:
    """The target's state after a tool, resuming it if the tool left it stopped.

    A tool killed mid-attach may leave a SIGSTOP behind that lands a moment later, so after
    a kill the state is watched for a short while. A target that was already stopped
    before we came is left as it was: someone else stopped it on purpose.
    """
    deadline = time.monotonic() + (0.3 if killed else 0.0)
    while True:
        if not still_same(target):
            return None
        letter = state_letter(target.pid)
        if letter in ("T", "t") and not stopped_before:
            break
        if time.monotonic() >= deadline:
            return describe_state(letter)
        time.sleep(0.02)
    # Stopped, and not by its owner: wait briefly for a tracer that is still detaching.
    for _ in range(25):
        if letter == "T" and tracer_pid(target.pid) == 0:
            break
        time.sleep(0.02)
        letter = state_letter(target.pid)
        if letter not in ("T", "t"):
            return describe_state(letter)
    if letter == "T":
        try:
            os.kill(target.pid, signal.SIGCONT)
        except OSError as e:
            return (
                f"stopped (T) after the attach; SIGCONT failed ({e.strerror}): "
                f"run kill -CONT {target.pid}"
            )
        for _ in range(25):
            letter = state_letter(target.pid)
            if letter not in ("T", "t"):
                return (
                    f"{describe_state(letter)}, resumed with SIGCONT after the attach left it "
                    "stopped"
                )
            time.sleep(0.02)
        return f"stopped (T) even after SIGCONT: run kill -CONT {target.pid}"
    tp = tracer_pid(target.pid)
    return f"tracing stop (t): still held by tracer pid {tp}" if tp else describe_state(letter)


_ATTACHING: dict[int, threading.Lock] = {}
_ATTACHING_GUARD = threading.Lock()


@contextlib.contextmanager
def one_tool_at_a_time(pid: int, wait: float) -> Iterator[bool]:
    """Hold `pid` for one of this process's tools (py-spy, gdb, strace) while it runs.

    Why: a target's state is read before an attach to tell a stop of its owner's from
    ours, and restored after; two of our tools on one pid at once read each other's stop.
    Waits at most `wait` s for the other (then runs anyway: the tools' own "another tracer
    holds it" path applies). Yields whether the pid was got.
    """
    with _ATTACHING_GUARD:
        if len(_ATTACHING) > 4096:  # pids of long gone processes
            for k in [k for k, v in _ATTACHING.items() if not v.locked()]:
                del _ATTACHING[k]
        lock = _ATTACHING.setdefault(pid, threading.Lock())
    got = lock.acquire(timeout=max(0.0, wait))
    try:
        yield got
    finally:
        if got:
            lock.release()
