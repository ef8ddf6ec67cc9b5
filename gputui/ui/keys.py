"""Every key of the dashboard and its screens, declared once.

Why one table: a key used to be written in three (the app's bindings, the help screen's
labels, the key bar's offers) and again in each screen; a key added to one and not the
others was missing from the help, or offered in the bar under a letter the app did not bind.
Each row here says everything about one key: what Textual binds (keys, action, id), the long
words of the command palette, the help screen's short label, and, for the keys the key bar
offers, its place and word there and the rule of when it has something to act on
(gputui.ui.key_offers). The app's BINDINGS, the help's rows, the key bar's hints and the
command palette are derived from it, and so are the screens' own BINDINGS.

Why the offers are not Textual's `check_action`: a falsy `check_action` also refuses the
key when it is pressed (App.run_action), and a dashboard key always answers, saying why it
cannot act (`j` with no suspect: "no stalled job"). So a key's `Bar.when` decides what the
bar offers, and the key itself stays bound.

The keys follow htop/nvitop habits where they exist (q, /, <, >, I, space, k, t).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import NamedTuple

from textual.binding import Binding, BindingType

from gputui.ui import key_offers as when
from gputui.ui.key_offers import Moment, Offered


class Bar(NamedTuple):
    """A key's offer in the key bar: its place (left first), its word, how the bar writes
    the key (if not as the help does), and when it is offered (None: always)."""

    at: int
    word: str
    key: str | None = None
    when: Offered | None = None


@dataclass(frozen=True)
class Key:
    """One key: what Textual binds, the palette's words (`does`), the help's `label` (at most
    26 cells, tests/test_app.py holds it), how it is written where its name is not what a
    person types (`display`), and its offer in the key bar (`bar`)."""

    keys: str
    action: str
    does: str
    label: str = ""
    id: str = ""
    display: str | None = None
    bar: Bar | None = None
    demo_label: str | None = None  # the help's words in the guided demo, where they differ
    palette: bool = True  # listed first in the command palette (ctrl+p)
    show: bool = True

    def binding(self, prefix: str = "") -> Binding:
        return Binding(
            self.keys,
            self.action,
            self.does,
            show=self.show,
            key_display=self.display,
            id=f"{prefix}{self.id}",
        )

    @property
    def shown(self) -> str:
        """The key as a person reads it: `?/F1/h`, `/`, `T`."""
        return self.display or self.keys


APP_KEYS: tuple[Key, ...] = (
    Key("q", "quit", "Quit", "quit", id="quit", bar=Bar(1, "quit"), palette=False),
    Key(
        "question_mark,f1,h",
        "help",
        "Help (every key)",
        "this help",
        id="help",
        display="?/F1/h",
        bar=Bar(2, "help", "?"),
    ),
    Key(
        "j",
        "jump_suspect",
        "Select the suspect rank's process",
        "select the suspect rank",
        id="jump_suspect",
        bar=Bar(3, "suspect", when=when.a_suspect_to_select),
    ),
    Key(
        "d",
        "details",
        "Verdict details: reason, findings, next steps",
        "details: findings, steps",
        id="details",
    ),
    Key(
        "p",
        "py_spy",
        "Python stack (py-spy dump)",
        "Python stack (py-spy dump)",
        id="py_spy",
        bar=Bar(4, "stack", when=when.a_stack_to_show),
    ),
    Key("n", "py_spy_native", "Python + native stack", "Python + native stack", id="py_spy_native"),
    Key(
        "g", "gdb", "gdb/cuda-gdb backtrace of every thread", "gdb backtrace, all threads", id="gdb"
    ),
    Key(
        "c",
        "core",
        "gdb backtrace of a crashed rank's core file",
        "gdb on a dead rank's core",
        id="core",
    ),
    Key(
        "T",
        "strace",
        "strace the process's system calls",
        "strace its system calls",
        id="strace",
        display="T",
        bar=Bar(10, "strace", when=when.a_live_process),
    ),
    Key(
        "a",
        "dump_all",
        "Dump all ranks of its job, stacks grouped",
        "all ranks' stacks, grouped",
        id="dump_all",
        bar=Bar(5, "all ranks", when=when.ranks_to_dump),
    ),
    Key(
        "k",
        "kill",
        "Send a signal (asks first)",
        "send a signal (asks first)",
        id="kill",
        bar=Bar(8, "kill", when=when.a_live_process),
    ),
    Key(
        "e",
        "environment",
        "Its environment (secrets redacted)",
        "its environment (redacted)",
        id="environment",
        bar=Bar(9, "env", when=when.a_process),
    ),
    Key("b", "bundle", "Write an incident bundle", "write an incident bundle", id="bundle"),
    Key(
        "X",
        "end_job",
        "End the stuck job's ranks here (after b; asks first)",
        "end the stuck job, after b",
        id="end_job",
        display="X",
    ),
    Key(
        "P",
        "probe",
        "Pairwise GPU probe",
        "pairwise GPU probe",
        id="probe",
        display="P",
        bar=Bar(11, "probe", when=when.gpus_to_probe),
    ),
    Key(
        "B",
        "probe_blamed",
        "Probe what the verdict blames: its GPU's pairs, or its host and neighbours",
        "probe the blamed GPU/host",
        id="probe_blamed",
        display="B",
    ),
    Key(
        "w",
        "profile",
        "Where its time goes: py-spy record, top functions",
        "where its time goes",
        id="profile",
    ),
    Key(
        "t",
        "tree",
        "Tree view: jobs and their ranks",
        "tree: jobs and their ranks",
        id="tree",
        bar=Bar(7, "tree"),
    ),
    Key(
        "slash",
        "filter",
        "Filter processes",
        "filter processes",
        id="filter",
        display="/",
        bar=Bar(6, "filter"),
    ),
    Key(
        "escape",
        "clear_filter",
        "Clear the filter",
        "clear message and filter",
        id="clear",
        display="esc",
        palette=False,
    ),
    Key(
        "less_than_sign",
        "sort_step(-1)",
        "Sort by the column to the left",
        "sort by the column left",
        id="sort_left",
        display="<",
        bar=Bar(12, "sort", "<>"),  # one offer for the pair
    ),
    Key(
        "greater_than_sign",
        "sort_step(1)",
        "Sort by the column to the right",
        "sort by the column right",
        id="sort_right",
        display=">",
    ),
    Key(
        "I",
        "sort_reverse",
        "Reverse the sort order",
        "reverse the sort",
        id="sort_rev",
        display="I",
    ),
    Key("s", "sort", "Cycle the sort column", "cycle the sort column", id="sort"),
    Key(
        "v",
        "view",
        "GPU view: auto / one line each / panels",
        "GPU view: auto/line/panel",
        id="view",
    ),
    Key(
        "C",
        "clocks",
        "Clocks of every GPU, and why they are held down (clock event reasons)",
        "clocks, throttle reasons",
        id="clocks",
        display="C",
    ),
    Key(
        "space",
        "pause",
        "Pause sampling",
        "pause sampling",
        id="pause",
        demo_label="demo: go on; else pause",
    ),
)
"""The dashboard's keys, in the order the help screen and the command palette list them."""

SIGNALS = (
    ("t", signal.SIGTERM, "SIGTERM: ask it to exit"),
    ("i", signal.SIGINT, "SIGINT: like Ctrl-C (KeyboardInterrupt in Python)"),
    ("k", signal.SIGKILL, "SIGKILL: kill it now (no cleanup)"),
    ("u", signal.SIGUSR1, "SIGUSR1: user signal 1 (some jobs dump state on it)"),
)
"""The kill dialog's keys: one per signal (the dialog lists them with these words)."""

SCREEN_KEYS: dict[str, tuple[Key, ...]] = {
    "table": (  # the process table's own (the help's TABLE_KEYS say them in words)
        Key("up", "move(-1)", "Up", id="up", show=False),
        Key("down", "move(1)", "Down", id="down", show=False),
        Key("pageup", "page(-1)", "Page up", id="pageup", show=False),
        Key("pagedown", "page(1)", "Page down", id="pagedown", show=False),
        Key("home", "edge(-1)", "First row", id="home", show=False),
        Key("end", "edge(1)", "Last row", id="end", show=False),
    ),
    "help": (Key("escape,q,question_mark,f1,h", "dismiss", "Close help", id="close"),),
    "text": (Key("escape,q", "dismiss", "Close", id="close"),),
    "clocks": (Key("escape,q", "dismiss", "Close", id="close"),),
    "tool_pane": (
        Key("escape,q", "close", "Close (stops the tool)", id="close"),
        Key("s", "save", "Save output to a file", id="save"),
    ),
    "run": (  # the probe screens (gputui.ui.screens.run), under their own prefix
        Key("c", "cancel", "Cancel the probe", id="cancel"),
        Key("escape", "cancel_or_close", "Cancel, or close when done", id="escape"),
        Key("q", "close", "Close (cancels a running probe)", id="close"),
    ),
    "kill": (
        Key("escape,n,q", "cancel", "Cancel", id="cancel"),
        *(Key(key, f"choose({int(sig)})", text, id=key) for key, sig, text in SIGNALS),
    ),
    "confirm": (
        Key("y", "answer(True)", "Yes", id="yes"),
        Key("escape,n,q", "answer(False)", "No", id="no"),
    ),
    "write": (Key("enter", "answer(True)", "Write", id="yes"),),
}
"""Each screen's own keys, by screen; a binding's id is `<prefix>.<id>` (the prefix is the
screen's name, or the run screen's own: `probe`, `world`)."""

TABLE_KEYS = (
    ("up/down", "move in the process table"),
    ("PgUp/PgDn", "a page up / down"),
    ("Home/End", "first / last process"),
    ("click", "a header: sort by it"),
    ("ctrl+p", "every action by name"),
)
"""The help's rows for the keys of the table and of Textual itself, after the app's keys."""

BINDINGS: list[BindingType] = [k.binding() for k in APP_KEYS]
"""The app's bindings (GputuiApp.BINDINGS)."""

LABELS = {k.id: k.label for k in APP_KEYS}
"""The help's words for each binding, by its id."""

DEMO_LABELS = {k.id: k.demo_label for k in APP_KEYS if k.demo_label}

_BAR = sorted((k for k in APP_KEYS if k.bar is not None), key=lambda k: k.bar.at if k.bar else 0)

KEY_HINTS: tuple[tuple[str, str], ...] = tuple(
    (k.bar.key or k.shown, k.bar.word) for k in _BAR if k.bar is not None
)
"""The key bar's offers, in their order: (the key as the bar writes it, its word)."""

PALETTE: tuple[Key, ...] = tuple(k for k in APP_KEYS if k.palette)
"""The keys the command palette lists first (ctrl+p)."""


def screen_bindings(screen: str, prefix: str | None = None) -> list[BindingType]:
    """A screen's BINDINGS from SCREEN_KEYS, with ids under `prefix` (the screen's name)."""
    return [k.binding(f"{prefix or screen}.") for k in SCREEN_KEYS[screen]]


_SHOWN = {k.id: k.shown for k in APP_KEYS}


def shown(key_id: str) -> str:
    """How the key of `key_id` is written (the B of `B probe GPU 1`): read on every drawn
    sample, so looked up, not searched."""
    return _SHOWN[key_id]


def hidden_keys(moment: Moment) -> frozenset[str]:
    """The key bar's keys (as KEY_HINTS writes them) with nothing to act on now."""
    return frozenset(
        k.bar.key or k.shown
        for k in _BAR
        if k.bar is not None and k.bar.when is not None and not k.bar.when(moment)
    )


def offer_line(*offers: tuple[str, str]) -> str:
    """Keys offered in a line of prose (the banner's, the demo's story bar), each written as
    the table writes it: `offer_line(("details", "why"))` is "d why"."""
    return " · ".join(f"{shown(key_id)} {words}" for key_id, words in offers)
