"""One panel per GPU: the figures a hang diagnosis needs, each with a short history."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from gputui.collect.model import GpuSample
from gputui.ui.format import bar, mib, num, sparkline
from gputui.ui.text_view import TextView

HISTORY = 60  # samples kept per GPU for the sparklines
SPARK_W = 16

_STATE_STYLE = {
    "spinning": "bold black on yellow",
    "suspect": "bold white on red",
    "computing": "green",
    "communicating": "cyan",
    "idle": "dim",
    "free": "dim",
}


def _level(frac: float | None) -> str:
    if frac is None:
        return "dim"
    return "red" if frac >= 0.9 else "yellow" if frac >= 0.6 else "green"


class GpuPanel(TextView):
    """Renders the newest sample of one GPU plus util/mem/power history."""

    DEFAULT_CSS = """
    GpuPanel { border: round $primary-darken-2; padding: 0 1; height: auto; }
    GpuPanel.-spinning { border: heavy $warning; }
    GpuPanel.-suspect { border: heavy $error; }
    GpuPanel.-stale { opacity: 60%; }
    """

    def __init__(self, index: int) -> None:
        super().__init__(id=f"gpu-{index}")
        self.index = index
        self.history: Sequence[GpuSample] = ()
        self.tag: str | None = None
        self.tag_detail = ""
        self.sample: GpuSample | None = None

    def show(
        self, history: Sequence[GpuSample], tag: str | None = None, tag_detail: str = ""
    ) -> None:
        """Redraw from this GPU's recent samples (newest last); `tag` is the detector's word
        for this GPU, if any. The history is kept by the sampler thread, so samples the UI
        skipped while busy still appear in the sparklines."""
        self.history = history
        self.sample = history[-1] if history else None
        self.tag, self.tag_detail = tag, tag_detail
        self.set_class(tag == "spinning", "-spinning")
        self.set_class(tag == "suspect", "-suspect")
        self.set_text(self.render_text())

    def render_text(self) -> Text:
        g = self.sample
        t = Text(no_wrap=True, overflow="ellipsis")
        if g is None:
            return t
        t.append(f"GPU {g.index} ", style="bold")
        t.append((g.name or "?").removeprefix("NVIDIA "), style="bold")
        if self.tag:
            t.append("  ")
            t.append(f" {self.tag.upper()}{self.tag_detail} ", style=_STATE_STYLE.get(self.tag, ""))
        t.append("\n")
        u = None if g.util is None else g.util / 100
        m = None if g.mem_util is None else g.mem_util / 100
        t.append("util  ").append(bar(u), style=_level(u)).append(f" {num(g.util, '%'):>4}  ")
        t.append(sparkline([h.util for h in self.history], 100, SPARK_W), style="cyan").append("\n")
        t.append("mem%  ").append(bar(m), style=_level(m)).append(f" {num(g.mem_util, '%'):>4}  ")
        mem_hist = sparkline([h.mem_util for h in self.history], 100, SPARK_W)
        t.append(mem_hist, style="magenta").append("\n")
        pf = g.power_frac
        t.append("power ").append(bar(pf), style=_level(pf))
        pct = f" {pf * 100:.0f}%" if pf is not None else ""
        t.append(f" {num(g.power_w)}/{num(g.power_limit_w)} W{pct}  ")
        if pf is not None:
            top, powers = 1.0, [h.power_frac for h in self.history]
        else:
            powers = [h.power_w for h in self.history]
            top = max((p for p in powers if p), default=1.0)
        t.append(sparkline(powers, top, SPARK_W), style="yellow").append("\n")
        mf = (
            (g.mem_used_mb / g.mem_total_mb)
            if g.mem_used_mb is not None and g.mem_total_mb
            else None
        )
        t.append("vram  ").append(bar(mf), style=_level(mf))
        t.append(f" {mib(g.mem_used_mb)}/{mib(g.mem_total_mb)}\n")
        t.append(
            f"temp {num(g.temp_c, 'C')}  SM {num(g.sm_mhz)} MHz  mem {num(g.mem_mhz)} MHz  "
            f"P{num(g.pstate)}"
        )
        if g.events is not None and g.events & 1:
            t.append("  idle", style="dim")
        t.append("\n")
        pids = ", ".join(map(str, g.pids)) or "no process"
        t.append(f"procs {pids}", style="dim" if not g.pids else "")
        if g.na:
            t.append(f"\nN/A: {', '.join(sorted(g.na))}", style="dim italic")
        return t
