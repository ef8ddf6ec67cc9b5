"""The verdict's states and, in one table, what each one means to every face.

Why one table: a state is read in many places (the exit code of `check`, the banner's colour,
the exporter's `gputui_job_state` label, which of two nodes' verdicts is the worse in
`merge`), and each used to spell the state as a string and keep its own list. Adding "slow"
touched eleven files. Now a state is a member of `State` and a row of `MEANING`; a face asks
the table (`exit_code`, `colour`, `exporter_value`, `worse`) and never names a state's
meaning itself. docs/recipes.md ("Add a verdict rule") walks a change through it.

The values are exactly the words `check --json`, the recordings and the exporter have
always used ("ok", "stalled", ...): a `State` is a `str`, equal to its word, hashed as it,
and printed as it, so every file written before and after reads the same. A state read back
from a file is a plain string; `State(word)` (or `parse`) turns it into a member.

This module imports nothing of gputui: the exit codes (gputui.diagnose.exitcodes), the
palette (gputui.ui.widgets.palette) and the exporter read it, and it reads none of them.
`tests/test_states.py` checks the table against the exit-code table and that no module
outside this one spells a state as a string.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class State(str, Enum):
    """A verdict's state, worst last here (`ORDER` lists them worst first)."""

    OK = "ok"
    BUSY = "busy"  # peers spin while the rank they wait for advances (a checkpoint): no alarm
    SLOW = "slow"  # the job progresses but waits on a straggler (gputui.diagnose.slow)
    STALLED = "stalled"  # a job's GPUs have spun in a collective for --stall-after seconds
    HUNG = "hung"  # ... for --hang-after seconds

    # Printed as its word on every Python (3.11 changed an Enum's format() to "State.OK").
    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)


@dataclass(frozen=True)
class Meaning:
    """What one state means to each face.

    Attributes:
        exit_code: the code of `check`/`snapshot`/`merge` for it (one of
            gputui.diagnose.exitcodes.TABLE's codes; a slow job's 4 only with --fail-on-slow).
        alarm: a hang: the Watcher gathers evidence, the banner shows suspects.
        colour: the Textual theme variable its badge is drawn on (a plain name: the palette,
            in ui/, turns it into a style; nothing below ui/ imports Textual).
        exporter_value: its `state` label on `gputui_job_state` (one-hot per job); None when
            the state is not a job state there (a slow job has `gputui_job_straggler`).
        label: the one word a badge shows.
    """

    exit_code: int
    alarm: bool
    colour: str
    exporter_value: str | None
    label: str


# Worst first: the order in which the worse of two verdicts is chosen (merge, the exporter's
# jobs that share a label, a window of history). A hang outranks a straggler (no progress
# against slow progress); a busy job is progress with a cause named, a notch above ok.
ORDER: tuple[State, ...] = (State.HUNG, State.STALLED, State.SLOW, State.BUSY, State.OK)

# The exit codes are gputui.diagnose.exitcodes' (HANG 1, SLOW 4, OK 0); written as numbers
# here so that this module stays the leaf both import (tests/test_states.py ties them).
MEANING: dict[State, Meaning] = {
    State.HUNG: Meaning(1, True, "error", "hung", "HUNG"),
    State.STALLED: Meaning(1, True, "warning", "stalled", "STALLED"),
    State.SLOW: Meaning(4, False, "secondary", None, "SLOW"),
    State.BUSY: Meaning(0, False, "accent", "busy", "BUSY"),
    State.OK: Meaning(0, False, "success", "ok", "OK"),
}

ALARMS: frozenset[State] = frozenset(s for s in ORDER if MEANING[s].alarm)
# The one-hot label values of gputui_job_state, in the order the exporter writes them (best
# first, as they always were: ok, busy, stalled, hung).
EXPORTED: tuple[str, ...] = tuple(
    v for s in reversed(ORDER) if (v := MEANING[s].exporter_value) is not None
)


def parse(word: object) -> State | None:
    """The state a word names (from a file, a line of `check --json`), None if none.

    Args:
        word: anything read from outside; only an exact state word is a state.

    Returns:
        The member, or None for anything else (never raises: a file is untrusted).
    """
    try:
        return State(word) if isinstance(word, str) else None
    except ValueError:
        return None


def is_alarm(state: object) -> bool:
    """Whether a state (a member or its word) is a hang: stalled or hung (anything else
    read from a file, even unhashable, is not)."""
    return isinstance(state, str) and state in ALARMS


# How bad each state is, worse larger (ORDER reversed), keyed by member and word alike.
_SEVERITY: dict[str, int] = {
    key: len(ORDER) - 1 - i for i, s in enumerate(ORDER) for key in (s, s.value)
}


def severity(state: object) -> int:
    """How bad a state is: 0 for ok, larger for worse; an unknown word counts as ok (never
    a false alarm), as an unknown state's exit code is healthy."""
    return _SEVERITY.get(state, 0) if isinstance(state, str) else 0


def worse(a: str, b: str) -> str:
    """The worse of two states (the first on a tie), by `ORDER`."""
    return b if severity(b) > severity(a) else a


def exit_code(state: object) -> int:
    """A state's exit code, before --fail-on-slow (gputui.diagnose.exitcodes.of_state applies
    it); an unknown word is healthy (0)."""
    s = parse(state)
    return 0 if s is None else MEANING[s].exit_code


def colour(state: State) -> str:
    """The theme variable a state's badge is drawn on (gputui.ui.widgets.palette)."""
    return MEANING[state].colour


def label(state: object) -> str:
    """The one word a badge shows for a state (an unknown word, upper-cased as it is)."""
    s = parse(state)
    return MEANING[s].label if s is not None else str(state).upper()
