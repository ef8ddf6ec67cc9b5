"""The exit codes of every command that judges (`check`, `merge`, `fleet`, `probe`): one table.

Scripts, health checks and epilogues branch on these, so they never change meaning:

| code | meaning |
| ---: | --- |
| 0 | healthy; a slow job (unless `--fail-on-slow`); a busy job (within `--busy-limit`) |
| 1 | a hang: a job stalled or hung (a rendezvous that never completes included) |
| 2 | usage or error: bad arguments, unreadable input, NVML failing or not answering |
| 3 | a sick GPU: a hardware Xid, uncorrected ECC errors, a pending row remap, a lost GPU |
| 4 | a slow job (a straggler), only when asked with `--fail-on-slow` |
| 5 | gputui itself failed: a bug; the message says where; not a verdict |

A busy job is one whose peers spin in a collective while the rank they wait for advances (it
writes a checkpoint, compiles, evaluates): no alarm; past `--busy-limit` it is a hang (1).

`snapshot` and `bundle` exit with the code of the verdict they show, `record` with the worst
verdict it saw: every face agrees with `check` (a hang or a death is never 0).

A replay or a `--duration` run exits with the worst verdict it saw, worst first:
hang (1) > sick GPU (3) > slow (4) > healthy (0). Errors (2) end the run at once.
"""

from __future__ import annotations

from gputui.diagnose import states

OK = 0
HANG = 1
ERROR = 2
SICK_GPU = 3
SLOW = 4
CRASH = 5
"""Every command, not only those that judge: an unexpected exception is one line on stderr
naming it and where, and this code, so a caller never reads a crash as a hang (1) or as bad
input (2). GPUTUI_DEBUG=1 prints the traceback as well (gputui.cli)."""

# Worse first: the order in which a run's worst verdict is chosen.
_SEVERITY = (HANG, SICK_GPU, SLOW, OK)

TABLE = (
    (OK, "healthy (a slow job too, unless --fail-on-slow; a busy job within --busy-limit)"),
    (HANG, "a hang: a job stalled or hung, a rendezvous that never completes"),
    (ERROR, "usage or error: bad arguments, unreadable input, NVML failing"),
    (SICK_GPU, "a sick GPU: hardware Xid, uncorrected ECC, pending row remap, lost GPU"),
    (SLOW, "a slow job (straggler), only with --fail-on-slow"),
    (CRASH, "gputui itself failed: a bug; the message says where; not a verdict"),
)


def worst(*codes: int) -> int:
    """The worst of verdict codes seen over a run (never called with ERROR: it ends a run)."""
    for c in _SEVERITY:
        if c in codes:
            return c
    return OK


def of_state(state: str, *, fail_on_slow: bool = False) -> int:
    """The code of one verdict's state, from the one table of states (gputui.diagnose.states:
    a busy job is 0, since past --busy-limit its verdict is stalled or hung again); an unknown
    state is healthy: never a false alarm."""
    code = states.exit_code(state)
    return OK if code == SLOW and not fail_on_slow else code


def of_verdict(verdict: object) -> int:
    """A face's code for the verdict it shows (None: nothing judged, healthy): `snapshot`,
    `bundle` and `record` exit with it, as `check` does, so that no face says 0 for a hang,
    a death or a stuck child while another says 1."""
    state = getattr(verdict, "state", None)
    return of_state(state) if isinstance(state, str) else OK


def help_text() -> str:
    """The table as `--help` epilog lines."""
    return "exit codes:\n" + "\n".join(f"  {c}  {what}" for c, what in TABLE)


def crash_line() -> str:
    """The crash code's line, for the epilog of a command with exit codes of its own."""
    return f"  {CRASH}  {dict(TABLE)[CRASH]}"
