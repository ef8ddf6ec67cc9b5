"""Colours and emphasis in one place: named roles, styled in Textual CSS on theme variables.

Why: the dashboard draws its lines itself (gputui.ui.widgets.strips) from Rich styles, and a span of
a line cannot carry a CSS class. So every colour the UI uses is a *role* ("hung", "alert",
"heading" ...), and each role is a component class of one hidden widget, styled below with
the theme's variables ($error, $text-warning, $primary-background ...). At mount and
whenever the theme changes, the app reads the computed styles into `CURRENT`; code asks for
a role with the spec "@hung" (or "@hung bold" to add emphasis) and never names a colour.
Textual's themes then restyle everything: the light ones, and the ANSI ones that keep the
terminal's own palette (`--theme ansi-light` on a light terminal). Without an app (tests of
the pure line builders, `snapshot` text) a role is plain.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from textual.widget import Widget

from gputui.diagnose.states import MEANING

# Roles with a background: a word that must stand out whatever is around it. The text on
# them is `$text` (Textual picks black or white for contrast with the background). Each
# verdict state is a role of its own name ("@hung"), on the theme colour the one table of
# states gives it (gputui.diagnose.states.MEANING): a new state needs no line here.
STATE_ROLES = {s.value: f"background: ${m.colour}; text-style: bold;" for s, m in MEANING.items()}
BLOCK_ROLES = {
    **STATE_ROLES,
    "waiting": "background: $warning;",
    "status": "background: $primary-background;",
    "keybar": "background: $footer-background;",
    "key": "color: $text-primary; background: $footer-background; text-style: bold;",
    "notice": "background: $warning; text-style: bold;",
    "story": "background: $warning-muted; text-style: bold;",
    "story-hint": "background: $warning-muted;",
}
# Roles that colour text on whatever background the line has (their background is dropped).
TEXT_ROLES = {
    "alert": "color: $text-error; text-style: bold;",  # a failure, a culprit, a bad pair
    "caution": "color: $text-warning; text-style: bold;",
    "high": "color: $text-error;",  # levels of a bar: >= 90 %
    "mid": "color: $text-warning;",  # >= 60 %; low power in a history bar (a spin)
    "low": "color: $text-success;",
    "good": "color: $text-success;",
    "info": "color: $text-primary;",  # communicating; moderate power
    "accent": "color: $text-accent;",  # a history bar without a power reading
    "heading": "color: $text-primary; text-style: bold;",
    "box": "color: $primary;",  # a GPU panel's border
    "box-spin": "color: $warning;",
    "box-bad": "color: $error;",
}
ROLES = {**BLOCK_ROLES, **TEXT_ROLES}
BLOCK_CSS = "color: $text; "

CURRENT: dict[str, Style] = {}  # role -> style in the current theme (empty: no app yet)
_specs: dict[str, Style] = {}  # "@role extra" -> style, cleared when the theme changes


def role(spec: str) -> Style:
    """The style of "@role" or "@role bold ...": the role's style in the current theme, plus
    the emphasis after it."""
    hit = _specs.get(spec)
    if hit is None:
        if not spec.startswith("@"):  # plain emphasis ("dim"): the same in every theme
            hit = _specs[spec] = Style.parse(spec)
            return hit
        name, _, extra = spec[1:].partition(" ")
        hit = CURRENT.get(name, Style())
        if extra:
            hit = hit + Style.parse(extra)
        _specs[spec] = hit
    return hit


def _css() -> str:
    rules = [
        f"Palette > .role--{n} {{ {'' if 'color:' in css else BLOCK_CSS}{css} }}"
        for n, css in BLOCK_ROLES.items()
    ]
    rules += [f"Palette > .role--{n} {{ {css} }}" for n, css in TEXT_ROLES.items()]
    return "Palette { display: none; }\n" + "\n".join(rules)


class Palette(Widget):
    """Hidden; holds the roles as component classes, so Textual computes them per theme."""

    COMPONENT_CLASSES = {f"role--{n}" for n in ROLES}
    DEFAULT_CSS = _css()

    def on_mount(self) -> None:
        self.read()
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)

    def read(self) -> None:
        """The roles' styles as Textual computed them for the current theme."""
        for n in ROLES:
            s = self.get_component_rich_style(f"role--{n}")
            if n in TEXT_ROLES:  # the widget's own background is not part of a text colour
                s = Style(color=s.color, bold=s.bold, italic=s.italic, dim=s.dim)
            CURRENT[n] = s
        _specs.clear()

    def _theme_changed(self, _theme: Any) -> None:
        # Textual updates the styles after the signal: read them once it has.
        self.call_after_refresh(self._restyle)

    def _restyle(self) -> None:
        self.read()
        restyle = getattr(self.app, "restyle", None)
        if restyle is not None:
            restyle()


def theme_names() -> list[str]:
    """The names `--theme` accepts: Textual's built-in themes (the command line checks a
    name here, so that only the UI package speaks to Textual)."""
    from textual.theme import BUILTIN_THEMES

    return sorted(BUILTIN_THEMES)
