"""The dashboard's keys, in the order the help screen and the command palette list them.

Why a module of its own: one table that the app binds, `?` shows and ctrl+p searches; the
keys follow htop/nvitop habits where they exist (q, /, <, >, I, space, k, t).
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

BINDINGS: list[BindingType] = [
    Binding("q", "quit", "Quit", id="quit"),
    Binding("question_mark,f1,h", "help", "Help (every key)", key_display="?/F1/h", id="help"),
    Binding("j", "jump_suspect", "Select the suspect rank's process", id="jump_suspect"),
    Binding("d", "details", "Verdict details: reason, findings, next steps", id="details"),
    Binding("p", "py_spy", "Python stack (py-spy dump)", id="py_spy"),
    Binding("n", "py_spy_native", "Python + native stack", id="py_spy_native"),
    Binding("g", "gdb", "gdb/cuda-gdb backtrace of every thread", id="gdb"),
    Binding("c", "core", "gdb backtrace of a crashed rank's core file", id="core"),
    Binding("T", "strace", "strace the process's system calls", key_display="T", id="strace"),
    Binding("a", "dump_all", "Dump all ranks of its job, stacks grouped", id="dump_all"),
    Binding("k", "kill", "Send a signal (asks first)", id="kill"),
    Binding("e", "environment", "Its environment (secrets redacted)", id="environment"),
    Binding("b", "bundle", "Write an incident bundle", id="bundle"),
    Binding(
        "X",
        "end_job",
        "End the stuck job's ranks here (after b; asks first)",
        key_display="X",
        id="end_job",
    ),
    Binding("P", "probe", "Pairwise GPU probe", key_display="P", id="probe"),
    Binding(
        "B",
        "probe_blamed",
        "Probe what the verdict blames: its GPU's pairs, or its host and neighbours",
        key_display="B",
        id="probe_blamed",
    ),
    Binding("w", "profile", "Where its time goes: py-spy record, top functions", id="profile"),
    Binding("t", "tree", "Tree view: jobs and their ranks", id="tree"),
    Binding("slash", "filter", "Filter processes", key_display="/", id="filter"),
    Binding("escape", "clear_filter", "Clear the filter", key_display="esc", id="clear"),
    Binding(
        "less_than_sign",
        "sort_step(-1)",
        "Sort by the column to the left",
        key_display="<",
        id="sort_left",
    ),
    Binding(
        "greater_than_sign",
        "sort_step(1)",
        "Sort by the column to the right",
        key_display=">",
        id="sort_right",
    ),
    Binding("I", "sort_reverse", "Reverse the sort order", key_display="I", id="sort_rev"),
    Binding("s", "sort", "Cycle the sort column", id="sort"),
    Binding("v", "view", "GPU view: auto / one line each / panels", id="view"),
    Binding("space", "pause", "Pause sampling", id="pause"),
]
