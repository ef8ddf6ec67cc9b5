"""Every key is declared once, in gputui/ui/keys.py, and what a person reads of it (the help,
the key bar, the command palette, each screen's keys) is derived from that row.

A key added to the app and not to the help, or offered in the bar under a letter the app
does not bind, fails here before anyone sees it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from gputui.collect.model import GpuSample, Job, ProcessInfo, Snapshot
from gputui.ui.app import GputuiApp
from gputui.ui.keys import (
    APP_KEYS,
    BINDINGS,
    KEY_HINTS,
    LABELS,
    PALETTE,
    SCREEN_KEYS,
    Moment,
    hidden_keys,
    shown,
)
from gputui.ui.screens.help import LABEL_WIDTH

UI = Path(__file__).resolve().parents[1] / "gputui" / "ui"


def binding_calls(path: Path) -> list[int]:
    """Line numbers where a module builds a Textual Binding itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Binding"
    ]


def test_no_module_of_the_ui_but_the_key_table_builds_a_binding():
    found = {
        str(p.relative_to(UI)): n
        for p in UI.rglob("*.py")
        if p.name != "keys.py" and (n := binding_calls(p))
    }
    assert found == {}


def test_every_key_has_one_id_and_a_help_label_that_fits():
    ids = [k.id for k in APP_KEYS]
    assert len(ids) == len(set(ids))
    assert [b.id for b in GputuiApp.BINDINGS] == ids == [b.id for b in BINDINGS]
    assert all(0 < len(LABELS[i]) <= LABEL_WIDTH for i in ids)


def test_the_key_bar_offers_its_keys_in_the_order_people_look_for_them():
    """The bar as it has always read, from the table's `Bar` rows."""
    assert KEY_HINTS == (
        ("q", "quit"),
        ("?", "help"),
        ("j", "suspect"),
        ("p", "stack"),
        ("a", "all ranks"),
        ("/", "filter"),
        ("t", "tree"),
        ("k", "kill"),
        ("e", "env"),
        ("T", "strace"),
        ("P", "probe"),
        ("<>", "sort"),
    )


def test_every_key_the_bar_offers_is_a_key_the_app_binds():
    bound = {key for b in BINDINGS for key in b.key.split(",")}
    names = {"?": "question_mark", "/": "slash", "<>": "less_than_sign"}
    assert {names.get(key, key) for key, _ in KEY_HINTS} <= bound
    assert shown("probe_blamed") == "B" and "B" in bound


def test_the_palette_lists_every_action_but_quit_and_clear():
    assert {k.action for k in APP_KEYS} - {k.action for k in PALETTE} == {"quit", "clear_filter"}


def test_each_screens_keys_are_the_tables_rows_under_its_prefix():
    from gputui.ui.screens.dialogs import KillDialog
    from gputui.ui.screens.help import HelpScreen
    from gputui.ui.screens.probe import ProbeScreen
    from gputui.ui.screens.tool_pane import ToolPane
    from gputui.ui.screens.world import WorldScreen

    for screen, group, prefix in (
        (HelpScreen, "help", "help"),
        (ToolPane, "tool_pane", "tool_pane"),
        (KillDialog, "kill", "kill"),
        (ProbeScreen, "run", "probe"),
        (WorldScreen, "run", "world"),
    ):
        ids = [b.id for b in screen.BINDINGS]
        assert ids == [f"{prefix}.{k.id}" for k in SCREEN_KEYS[group]], screen


def proc(pid: int, gpus: tuple[int, ...] = (), name: str = "sleep") -> ProcessInfo:
    return ProcessInfo(pid=pid, name=name, cmdline=(name,), gpus=gpus)


def test_with_nothing_selected_the_bar_offers_only_what_needs_no_process():
    empty = Moment(replay=False, snap=None, verdict=None, selected=None)
    assert hidden_keys(empty) == frozenset("jpkeTaP")


def test_a_live_gpu_rank_of_a_two_rank_job_is_offered_every_process_key():
    a, b = proc(10, (0,), "python"), proc(11, (1,), "python")
    snap = Snapshot(
        t=0.0,
        gpus=(GpuSample(index=0), GpuSample(index=1)),
        processes=(a, b),
        jobs=(Job(key="j", label="job", pids=(10, 11), gpus=(0, 1)),),
    )
    live = Moment(replay=False, snap=snap, verdict=None, selected=a)
    assert hidden_keys(live) == frozenset("j")  # no alarm: no suspect to jump to


def test_a_replay_offers_only_what_the_recording_holds():
    a = proc(10, (0,), "python")
    snap = Snapshot(t=0.0, gpus=(GpuSample(index=0),), processes=(a,))
    no_stacks = Moment(replay=True, snap=snap, verdict=None, selected=a)
    assert hidden_keys(no_stacks) == frozenset("jkTpaP")  # e: its recorded environment
    assert hidden_keys(Moment(True, snap, None, a, probe=True)) == frozenset("jkTpa")


def test_the_dashboards_page_lists_every_key():
    """docs/dashboard.md's Keys section names each key in backticks (`w` and `X` were missing
    from it while the app bound them)."""
    page = (UI.parents[1] / "docs" / "dashboard.md").read_text(encoding="utf-8")
    section = page.split("## Keys", 1)[1].split("\n## ", 1)[0]
    words = {
        "question_mark": "?",
        "f1": "F1",
        "slash": "/",
        "escape": "esc",
        "less_than_sign": "<",
        "greater_than_sign": ">",
    }
    missing = [
        key
        for k in APP_KEYS
        for key in (words.get(name, name) for name in k.keys.split(","))
        if f"`{key}`" not in section
    ]
    assert missing == []
