"""Every string the dashboard draws passes the one sanitizer (gputui.textsafe.clean).

A recording whose rendezvous job key held `ESC ] 2 ; ... BEL`, replayed in tmux, renamed the
pane, and OSC 52 in it wrote the clipboard: Rich and Textual pass ESC through. The class is
closed where text becomes something drawable: `gputui.ui.widgets.strips.Line` (every line view) and
`gputui.ui.widgets.safe_text` (every pane built from Rich Text or a Static) clean each string, and
the app's `notify` cleans its messages. So:

- the source test fails on any module of gputui/ui that builds its text another way (Rich's
  Text, Textual's Static or Label, a Segment of its own);
- a recording whose every string (samples and every typed record: stacks, nccl, health,
  rendezvous, lastwords, error) carries OSC 0/2/52, CSI, DCS, C1 controls and bidi
  overrides (tests/escape_recording.py) is replayed through the real app, every screen a
  key opens is composed (tests/screen.py), and no line holds a control character;
- the same recording in a real tmux: the pane title stays, no clipboard write lands, and the
  bytes the dashboard wrote to its terminal hold none of the payload's sequences. A control
  run shows that this tmux does honour them when a program prints them raw.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from escape_recording import PAYLOAD, write
from screen import run_to_end, screen_text
from tmux import Tmux, needs_tmux

from gputui.collect.source import ReplaySource
from gputui.collect.trace.format import read_trace
from gputui.textsafe import is_clean

UI = Path(__file__).resolve().parents[1] / "gputui" / "ui"
FORBIDDEN = {
    ("rich.text", "Text"): "gputui.ui.widgets.safe_text.Text",
    ("textual.widgets", "Static"): "gputui.ui.widgets.safe_text.Static",
    ("textual.widgets", "Label"): "gputui.ui.widgets.safe_text.Static",
    ("textual.content", "Content"): "gputui.ui.widgets.safe_text.Static or strips.Line",
}


def test_no_module_of_the_dashboard_draws_text_around_the_sanitizer():
    wrong = []
    for path in sorted(UI.glob("*.py")):
        if path.name == "safe_text.py":
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    use = FORBIDDEN.get((node.module, alias.name))
                    if use:
                        wrong.append(f"{path.name}:{node.lineno}: {alias.name}: use {use}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Segment"
                and path.name != "strips.py"
            ):
                wrong.append(f"{path.name}:{node.lineno}: a Segment: use strips.Line")
    assert not wrong, "\n".join(wrong)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("escapes")
    return {
        "stall, records tied to the job": write(d / "tied.jsonl", tied=True, spin=True),
        "stall, every string poisoned": write(d / "all.jsonl", tied=False, spin=True),
        "rendezvous, records tied": write(d / "rdzv.jsonl", tied=True, spin=False),
        "rendezvous, job key poisoned": write(d / "rdzv-all.jsonl", tied=False, spin=False),
    }


def _unclean(lines: list[str]) -> list[str]:
    return [repr(ln) for ln in lines if not is_clean(ln)]


# Keys that open a screen or say something: each is pressed, the screen read, then escape.
KEYS = ["d", "j", "p", "e", "c", "k", "g", "T", "a", "w", "t", "question_mark", "slash"]


@pytest.mark.parametrize(
    "name",
    [
        "stall, records tied to the job",
        "stall, every string poisoned",
        "rendezvous, records tied",
        "rendezvous, job key poisoned",
    ],
)
async def test_a_recording_full_of_escapes_draws_none_on_any_screen(recordings, name):
    from gputui.ui.app import GputuiApp

    source = ReplaySource(read_trace(recordings[name]), name=name, realtime=False)
    app = GputuiApp(source)
    seen: dict[str, list[str]] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        await run_to_end(app, pilot)
        seen["main"] = screen_text(app)
        for key in KEYS:
            await pilot.press(key)
            await pilot.pause()
            await pilot.pause()
            seen[key] = screen_text(app)
            await pilot.press("escape")
            await pilot.pause()
    bad = {where: _unclean(lines) for where, lines in seen.items() if _unclean(lines)}
    assert not bad, bad
    shown = "\n".join(ln for lines in seen.values() for ln in lines)
    # the payload is there, harmless: escaped (`\x1b]2;`), or read as U+FFFD (the reader makes
    # a recording's strings printable)
    assert "PWNED-TITLE" in shown and ("\\x1b]2;" in shown or "\ufffd]2;" in shown)


# ------------------------------------------------------------------ in a real terminal

# What the payload would do to a terminal: none of it may be in the dashboard's output.
SEQUENCES = {
    "OSC 0 (title)": rb"\x1b\]0;",
    "OSC 2 (title)": rb"\x1b\]2;",
    "OSC 52 (clipboard)": rb"\x1b\]52;",
    "DCS": rb"\x1bP",
    "C1 controls": rb"\xc2[\x80-\x9f]",
    "bidi overrides": rb"\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]",
}


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux(120, 40)
    yield t
    t.close()


@needs_tmux
def test_control_this_tmux_obeys_the_payload_when_a_program_prints_it_raw(tmux, tmp_path):
    out = tmp_path / "out.bin"
    code = f"import sys, time; print({PAYLOAD!r} + 'printed', flush=True); time.sleep(30)"
    tmux.start([sys.executable, "-c", code], output=str(out))
    tmux.wait_for("printed")
    tmux.wait(lambda _s: "PWNED-CLIP" in " ".join(tmux.buffers()), "the clipboard write", 10)
    assert tmux.title() in ("PWNED-TITLE", "PWNED-ICON")
    raw = out.read_bytes()
    assert all(re.search(p, raw) for p in SEQUENCES.values())


@needs_tmux
@pytest.mark.parametrize("name", ["rendezvous, job key poisoned", "stall, every string poisoned"])
def test_in_tmux_the_dashboard_leaves_the_title_and_clipboard_alone(
    recordings, tmux, tmp_path, name
):
    out = tmp_path / "out.bin"
    argv = [sys.executable, "-m", "gputui", "--replay", str(recordings[name]), "--start", "12"]
    tmux.start(argv, output=str(out))
    tmux.wait_for("gputui", timeout=60)
    title = tmux.title()
    tmux.wait_for("STALLED", "PWNED-TITLE", timeout=60)  # the records are on screen
    tmux.keys("d")
    tmux.wait_for("verdict details", "PWNED-C1", timeout=15)
    tmux.keys("Escape")  # alone: escape and q at once read as alt+q
    tmux.wait_gone("verdict details")
    tmux.keys("q")
    tmux.wait(lambda _s: tmux.pane_dead(), "gputui quit", 30)
    assert tmux.title() == title and "PWNED" not in title
    assert tmux.buffers() == []
    raw = out.read_bytes()
    assert b"PWNED" in raw  # the payload was drawn, as text
    found = {what: m.group(0) for what, p in SEQUENCES.items() if (m := re.search(p, raw))}
    assert not found, found
