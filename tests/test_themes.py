"""Colours come from the theme, never from the code (gputui/ui/widgets/palette.py).

On the real recording's hang at 80x24, for the themes that matter: every colour on screen is
the theme's (a truecolor theme shows no named ANSI colour; an ANSI theme, which keeps the
terminal's own palette for light terminals, shows no fixed RGB colour), each word that must
stand out keeps a readable contrast, the STALLED badge is the theme's warning colour, and
switching the theme while the app runs (ctrl+p, "Theme") repaints every line in the
new colours. A bad `--theme` is one line and exit 2.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from rich.color import ColorType
from rich.style import Style
from screen import run_to_end, screen_text

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent / "scripts"))
from gputui.ui.app import GputuiApp  # noqa: E402
from screenshots import window  # noqa: E402

TRUECOLOR_THEMES = ["textual-dark", "textual-light"]
ANSI_THEMES = ["ansi-light", "ansi-dark"]


def styled_cells(app) -> list[tuple[str, Style]]:
    """(text, style) of every segment the compositor draws, control segments left out."""
    out = []
    for strip in app.screen._compositor.render_strips():
        for seg in strip:
            if seg.text and not seg.control and seg.style is not None:
                out.append((seg.text, seg.style))
    return out


def drawn_cells(app) -> list[tuple[str, Style]]:
    """(text, style) of the segments the widgets drew, before Textual composes them (the
    compositor turns a named colour into the theme's RGB: only here can it be told apart)."""
    from gputui.ui.widgets.strips import LineView

    strips = [s for w in app.screen.query(LineView) for s in w._strips]
    strips += app.table._shown
    return [(seg.text, seg.style) for st in strips for seg in st if seg.text and seg.style]


def luminance(rgb: tuple[int, int, int]) -> float:
    def ch(c: int) -> float:
        c2 = c / 255
        return c2 / 12.92 if c2 <= 0.03928 else ((c2 + 0.055) / 1.055) ** 2.4

    r, g, b = rgb
    return 0.2126 * ch(r) + 0.7152 * ch(g) + 0.0722 * ch(b)


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


async def hang_screen(demo_snaps, theme: str, pilot_then=None):
    app = GputuiApp(window(demo_snaps, "stall_in_loop", 20.0), theme=theme)
    async with app.run_test(size=(80, 24)) as pilot:
        await run_to_end(app, pilot)
        if pilot_then is not None:
            await pilot_then(app, pilot)
        return screen_text(app), styled_cells(app), app, drawn_cells(app)


@pytest.mark.parametrize("theme", TRUECOLOR_THEMES)
async def test_a_truecolor_theme_shows_only_its_own_colours_and_readable_words(demo_snaps, theme):
    text, cells, _app, drawn = await hang_screen(demo_snaps, theme)
    assert any("STALLED" in ln for ln in text), text
    named = {
        (t, str(s))
        for t, s in drawn
        for c in (s.color, s.bgcolor)
        if c is not None and c.type in (ColorType.STANDARD, ColorType.EIGHT_BIT)
    }
    assert not named, f"colours not from the theme: {sorted(named)[:5]}"
    for t, s in cells:
        if not t.strip() or s.color is None or s.bgcolor is None or s.dim:
            continue
        fg, bg = s.color.get_truecolor(), s.bgcolor.get_truecolor()
        assert contrast(tuple(fg), tuple(bg)) >= 3.0, (t, str(s))


@pytest.mark.parametrize("theme", ANSI_THEMES)
async def test_an_ansi_theme_keeps_the_terminals_own_palette(demo_snaps, theme):
    text, _cells, _app, drawn = await hang_screen(demo_snaps, theme)
    assert any("STALLED" in ln for ln in text), text
    fixed = {
        (t, str(s))
        for t, s in drawn
        for c in (s.color, s.bgcolor)
        if c is not None and c.type == ColorType.TRUECOLOR
    }
    assert not fixed, f"fixed RGB colours in an ANSI theme: {sorted(fixed)[:5]}"


@pytest.mark.parametrize("theme", [*TRUECOLOR_THEMES, *ANSI_THEMES])
async def test_the_stalled_badge_is_the_themes_warning_colour(demo_snaps, theme):
    _text, cells, app, _drawn = await hang_screen(demo_snaps, theme)
    warning = app.theme_variables["warning"]
    badge = next(s for t, s in cells if "STALLED" in t)
    assert badge.bgcolor is not None and badge.bold
    expect = Style.parse(f"on {warning}").bgcolor if warning.startswith("#") else None
    if expect is not None:
        assert badge.bgcolor.get_truecolor() == expect.get_truecolor(), (str(badge), warning)
    else:  # an ANSI theme: a colour of the terminal's palette
        assert badge.bgcolor.type in (ColorType.STANDARD, ColorType.DEFAULT), str(badge)


async def test_switching_the_theme_while_running_repaints_every_line(demo_snaps):
    seen: dict[str, Style] = {}

    async def switch(app, pilot):
        seen["status"], seen["gpu"] = _style_of(app, "replay"), _style_of(app, "H200")
        app.theme = "textual-light"
        await pilot.pause()
        await pilot.pause()
        seen["status after"], seen["gpu after"] = _style_of(app, "replay"), _style_of(app, "H200")

    await hang_screen(demo_snaps, "textual-dark", switch)
    light_bg = Style.parse("on #E0E0E0").bgcolor  # textual-light's $background
    assert seen["gpu after"].bgcolor is not None and light_bg is not None
    assert seen["gpu after"].bgcolor.get_truecolor() == light_bg.get_truecolor()
    assert seen["gpu after"] != seen["gpu"]
    assert seen["status after"] != seen["status"]


def _style_of(app, needle: str) -> Style:
    for t, s in styled_cells(app):
        if needle in t:
            return s
    raise AssertionError(f"{needle!r} not on screen")


def test_a_theme_that_does_not_exist_is_one_line_and_exit_2():
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "--demo", "--theme", "no-such-theme"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--theme: no theme 'no-such-theme'" in r.stderr
    assert "textual-light" in r.stderr and "Traceback" not in r.stderr
    env = {**__import__("os").environ, "GPUTUI_THEME": "nope"}
    r = subprocess.run(
        [sys.executable, "-m", "gputui", "--demo"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert r.returncode == 2 and r.stderr.startswith("gputui: $GPUTUI_THEME: no theme 'nope'")


def test_no_colour_is_named_in_the_ui_code_outside_the_palette():
    """Every string in gputui/ui that Rich would read as a style with a colour ("bold red",
    "white on #262626") is a colour the theme cannot change: only palette.py names them,
    through the theme's variables."""
    import ast
    from pathlib import Path

    from rich.errors import StyleSyntaxError

    ui = Path(__file__).resolve().parent.parent / "gputui" / "ui"
    found = []
    for path in sorted(ui.glob("*.py")):
        if path.name == "palette.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value:
                try:
                    st = Style.parse(node.value)
                except (StyleSyntaxError, ValueError):
                    continue
                if st.color is not None or st.bgcolor is not None:
                    found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert not found, found
