"""The verdict banner: what the hang detector concluded, in plain words, and what to do."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from gputui.ui.text_view import TextView


def verdict_text(v: Any, now: float) -> Text:
    """Render a diagnose.Verdict (duck-typed, so the UI does not depend on its internals)."""
    t = Text()
    state = getattr(v, "state", "ok")
    if state == "ok":
        t.append(" OK ", style="bold black on green")
        t.append(f"  {v.reason}", style="dim")
        return t
    since = getattr(v, "since", None)
    dur = f" for {now - since:.0f} s" if since is not None else ""
    t.append(
        f" {state.upper()}{dur} ",
        style="bold white on red" if state == "hung" else "bold black on yellow",
    )
    if getattr(v, "job", None):
        t.append(f"  job {v.job}", style="bold")
    spin = ", ".join(map(str, v.spinning)) or "none"
    sus = ", ".join(map(str, v.suspects)) or "none named"
    t.append(f"  spinning GPU {spin}  ·  suspect GPU {sus}")
    if getattr(v, "suspect_pids", ()):
        t.append(f" (pid {', '.join(map(str, v.suspect_pids))})", style="bold")
    t.append(f"\n{v.reason}")
    steps = list(getattr(v, "next_steps", ()))[:2]
    keys = "j: select suspect · p: its Python stack · a: dump all ranks · b: incident bundle"
    t.append(f"\nNext: {keys}", style="bold")
    for s in steps:
        t.append(f"\n  · {s}", style="italic")
    return t


class VerdictBanner(TextView):
    DEFAULT_CSS = """
    VerdictBanner { height: auto; padding: 0 1; display: none; }
    VerdictBanner.-show { display: block; }
    VerdictBanner.-alarm { background: $error 15%; border: heavy $error; }
    """

    def show(self, verdict: Any | None, now: float) -> None:
        if verdict is None:
            self.set_class(False, "-show")
            return
        self.set_class(True, "-show")
        self.set_class(getattr(verdict, "state", "ok") != "ok", "-alarm")
        self.set_text(verdict_text(verdict, now))
