"""The GPUs: one line each (compact) or one boxed panel each (full), chosen from the size.

At 80x24, or with 8 GPUs at 120x40, boxed panels would push the process table (and the
suspect's row) off the screen, so below a size the board switches to one line per GPU:
name, the detector's word for it, util, mem%, power/limit and its share of the limit, VRAM,
temperature, and a util history that fills the rest of the line, each bar coloured by the
power drawn at that sample: a spinning NCCL wait is a full-height bar at idle power, which
is exactly what a hang looks like. `v` cycles auto / compact / full.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.segment import Segment
from textual.strip import Strip

from gputui.collect.model import GpuSample
from gputui.textsafe import clean
from gputui.ui.keys import shown
from gputui.ui.widgets.format import bar, mib, num
from gputui.ui.widgets.strips import Line, LineView, fit, spaces, style

HISTORY = 240  # samples kept per GPU: enough to fill a 240-column line
PANEL_MIN_W = 46
PANEL_H = 7  # a boxed panel: border, 5 lines, border
SPARK = "▁▂▃▄▅▆▇█"

TAG_STYLE = {
    "spinning": "@stalled",
    "suspect": "@hung",
    "busy": "@busy",
    "waiting": "@waiting",
    "computing": "@good",
    "communicating": "@info",
    "idle": "dim",
    "free": "dim",
    "unknown": "dim",
}


@dataclass(frozen=True)
class GpuHistory:
    """Recent readings of one GPU as plain floats (oldest first): util %, mem_util %, and
    power as a fraction of the limit (None where a reading was missing)."""

    util: tuple[float | None, ...] = ()
    mem: tuple[float | None, ...] = ()
    power: tuple[float | None, ...] = ()


def choose_mode(n_gpus: int, width: int, height: int, reserved: int) -> str:
    """ "full" when boxed panels leave the table at least 8 lines, else "compact".

    `reserved`: lines the status line, banner and key bar take.
    """
    if n_gpus == 0:
        return "compact"
    per_row = max(1, width // PANEL_MIN_W)
    rows = -(-n_gpus // per_row)
    return "full" if rows * PANEL_H + reserved + 8 <= height else "compact"


def _level(frac: float | None) -> str:
    if frac is None:
        return "dim"
    return "@high" if frac >= 0.9 else "@mid" if frac >= 0.6 else "@low"


def _power_colour(frac: float | None) -> str:
    """Colour of a history bar by the power at that sample: low power reads as a warning
    (idle, or a kernel spinning in a wait), moderate as info, high as good (arithmetic)."""
    if frac is None:
        return "dim"
    return "@mid" if frac < 0.25 else "@info" if frac < 0.5 else "@low"


def spark(
    line: Line, values: Sequence[float | None], width: int, power: Sequence[float | None] | None
) -> None:
    """Append the last `width` values (0..100) as bars, right-aligned, each coloured by the
    power fraction of its sample (the accent colour without one). Only the samples that fit are
    read: the history holds up to 240 (a wide terminal), and this runs for every GPU line
    at every sample."""
    vals = list(values)[-width:] if width else []
    if power is None:
        cols = ["@accent"] * len(vals)
    else:
        cols = [_power_colour(p) for p in (list(power)[-width:] if width else [])]
    if len(vals) < width:
        line.add(" " * (width - len(vals)))
    run: list[str] = []
    run_colour: str | None = None
    for v, c in zip(vals, cols, strict=False):
        ch = " " if v is None else SPARK[int(round(min(1.0, max(0.0, v / 100)) * 7))]
        if c != run_colour and run:
            line.add("".join(run), run_colour or "")
            run = []
        run_colour = c
        run.append(ch)
    if run:
        line.add("".join(run), run_colour or "")


def short_name(name: str | None) -> str:
    return (name or "?").removeprefix("NVIDIA ").strip()


class GpuBoard(LineView):
    """All GPUs in one line-based widget."""

    DEFAULT_CSS = "GpuBoard { height: auto; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.gpus: tuple[GpuSample, ...] = ()
        self.history: dict[int, GpuHistory] = {}
        self.tags: dict[int, tuple[str, str]] = {}
        self.health: dict[int, Any] = {}  # GPU -> gputui.diagnose.health.judge.GpuHealth, not ok
        self.stale = False
        self.view = "auto"  # "auto" | "compact" | "full"
        self.reserved = 6  # lines other widgets take; set by the app
        # What was drawn last, by its content: a GPU whose panel (or line) reads the same as
        # at the previous sample keeps its Strips, which are then neither joined, styled nor
        # compared again (an idle GPU's panel rarely changes). Keys hold the segments
        # themselves (text and style), so a new theme or any change of content misses.
        self._drawn: dict[Any, tuple[Any, Any]] = {}

    def show(
        self,
        gpus: Sequence[GpuSample],
        history: dict[int, GpuHistory],
        tags: dict[int, tuple[str, str]],
        stale: bool = False,
        health: dict[int, Any] | None = None,
    ) -> None:
        self.gpus, self.history, self.tags, self.stale = tuple(gpus), history, tags, stale
        self.health = health or {}
        self.redraw()

    @property
    def mode(self) -> str:
        if self.view != "auto":
            return self.view
        size = self.app.size
        return choose_mode(len(self.gpus), size.width, size.height, self.reserved)

    def build(self, width: int) -> list[Strip]:
        if not self.gpus:
            return []
        lines = self._full(width) if self.mode == "full" else self._compact(width)
        if self.stale:
            return [s.apply_style(style("dim")) for s in lines]
        return lines

    # ------------------------------------------------------------ compact: a line per GPU

    def _compact(self, width: int) -> list[Strip]:
        head = Line()
        head.cell(" #", 2).add(" ").cell("GPU", 8).add(" ").cell("STATE", 14).add(" ")
        head.cell("UTIL", 4, align=">").add(" ").cell("MEM%", 4, align=">").add(" ")
        head.cell("POWER/LIMIT", 13).add(" ").cell("VRAM", 4, align=">").add(" ")
        head.cell("TEMP", 4, align=">").add(" ")
        room = max(0, width - head.length)
        label = "UTIL HISTORY (colour: power)"
        head.add(fit(label if len(label) <= room else "HISTORY", room))
        lines = [head.strip(width, "bold")]
        gpus = self.gpus
        room = self._room()
        hidden = 0
        if self.view == "auto" and len(gpus) > room:
            # Too short for every GPU: the ones the detector points at first, then by index,
            # and a line that says how many are left out.
            keep = max(1, room - 1)
            first = {"suspect": 0, "spinning": 1}
            order = sorted(
                gpus, key=lambda g: (first.get(self.tags.get(g.index, ("",))[0], 2), g.index)
            )
            chosen = {g.index for g in order[:keep]}
            hidden = len(gpus) - len(chosen)
            gpus = tuple(g for g in gpus if g.index in chosen)
        for g in gpus:
            lines.append(self._compact_line(g, width))
        if hidden:
            more = (
                f" … {hidden} more GPU(s): a taller terminal, or {shown('view')} for panels, "
                "shows all"
            )
            lines.append(Line().add(fit(more, width), "dim italic").strip(width))
        return lines

    def _room(self) -> int:
        """GPU lines that fit while leaving the table its header and four rows."""
        height = self.app.size.height if self.is_mounted else 10**6
        return max(2, height - self.reserved - 1 - 5)

    def _compact_line(self, g: GpuSample, width: int) -> Strip:
        tag, detail = self.tags.get(g.index, ("", ""))
        line = Line().cell(str(g.index), 2, "bold", ">").add(" ")
        line.cell(short_name(g.name), 8, "bold").add(" ")
        sick = self.health.get(g.index)
        if sick is not None:  # the health mark leads the cell: "✖ SUSPECT", "! DEGRADED"
            word = f"{_tag_text(tag)}{detail}" if tag in ("spinning", "suspect") else ""
            text = f"{_MARK[sick.word]} {word or sick.word.upper()}"
            line.cell(text, 14, HEALTH_STYLE[sick.word])
        else:
            line.cell(f"{_tag_text(tag)}{detail}", 14, TAG_STYLE.get(tag, ""))
        line.add(" ")
        line.cell(num(g.util), 4, _level(_frac(g.util)), ">").add(" ")
        line.cell(num(g.mem_util), 4, _level(_frac(g.mem_util)), ">").add(" ")
        pf = g.power_frac
        power = f"{num(g.power_w)}/{num(g.power_limit_w)}W"
        pct = f"{pf * 100:.0f}%" if pf is not None else ""
        line.cell(f"{power} {pct}".strip(), 13, _power_colour(pf)).add(" ")
        vram = _vram_frac(g)
        line.cell(f"{vram * 100:.0f}%" if vram is not None else "N/A", 4, _level(vram), ">")
        line.add(" ").cell(num(g.temp_c, "C"), 4, align=">").add(" ")
        h = self.history.get(g.index) or GpuHistory((g.util,), (g.mem_util,), (pf,))
        spark(line, h.util, max(0, width - line.length), h.power)
        return self._same(
            ("line", g.index), (width, tuple(line.segments)), lambda: line.strip(width)
        )

    def _same(self, slot: Any, key: Any, make: Any) -> Any:
        """What `make()` made the last time `slot` had this `key`, else `make()`'s new one."""
        last = self._drawn.get(slot)
        if last is not None and last[0] == key:
            return last[1]
        made = make()
        self._drawn[slot] = (key, made)
        return made

    # ------------------------------------------------------------ full: a boxed panel per GPU

    def _full(self, width: int) -> list[Strip]:
        per_row = max(1, min(len(self.gpus), width // PANEL_MIN_W))
        pw = width // per_row
        out: list[Strip] = []
        for start in range(0, len(self.gpus), per_row):
            panels = [self._panel(g, pw) for g in self.gpus[start : start + per_row]]
            last = self._drawn.get(("row", start))
            if last is not None and last[0][0] == width and _same_objects(last[0][1], panels):
                out += last[1]  # every panel of the row is the one drawn last time
                continue
            # One Strip per screen line, its panels' segments side by side (a Strip is not
            # cheap to make: Textual gives each its caches).
            used = pw * len(panels)
            pad = [spaces(width - used)] if used < width else []
            joined = [
                Strip([seg for p in panels for seg in p[y]] + pad, max(used, width))
                for y in range(PANEL_H)
            ]
            self._drawn[("row", start)] = ((width, panels), joined)  # holds the panels
            out += joined
        return out

    def _panel(self, g: GpuSample, w: int) -> list[list[Segment]]:
        """The panel's 7 lines as segments, each exactly `w` cells."""
        tag, detail = self.tags.get(g.index, ("", ""))
        box = "@box-spin" if tag == "spinning" else "@box-bad" if tag == "suspect" else "@box"
        inner = w - 4
        title = f"─ GPU {g.index} · {short_name(g.name)} "
        label = f" {_tag_text(tag)}{detail} " if tag else ""
        sick = self.health.get(g.index)
        if sick is not None:
            box = "@box-bad" if sick.word == "failed" else "@box-spin"
        room = max(0, w - 4 - len(label))
        top = (
            Line()
            .add("╭", box)
            .add(title if len(title) <= room else fit(title, room), f"{box} bold")
        )
        top.add("─" * max(0, w - 2 - top.length - len(label)), box)
        top.add(label, TAG_STYLE.get(tag, "")).add("─╮", box)
        h = self.history.get(g.index) or GpuHistory((g.util,), (g.mem_util,), (g.power_frac,))
        pf = g.power_frac
        keep = max(0, w - 4)  # no more samples than the panel's width can show
        power_hist = [None if p is None else p * 100 for p in list(h.power)[-keep:]]
        power_fig = f"{num(g.power_w)}/{num(g.power_limit_w)} W"
        if pf is not None:
            power_fig += f" {pf * 100:.0f}%"
        vram = _vram_frac(g)
        pids = ", ".join(map(str, g.pids))
        last = Line()
        if sick is not None:  # what is wrong replaces the clocks: it matters more
            last.add(
                f"{_MARK[sick.word]} {sick.word.upper()}: {clean(sick.reason)}  ",
                HEALTH_STYLE[sick.word],
            )
        last.add(f"SM {num(g.sm_mhz, ' MHz')}  mem {num(g.mem_mhz, ' MHz')}  ")
        last.add(f"pids {pids}" if pids else "no process", "" if pids else "dim")
        if g.na:
            last.add(f"  N/A: {', '.join(sorted(g.na))}", "dim italic")
        body = [
            _metric("util ", _frac(g.util), f"{num(g.util, '%'):>4}", h.util, h.power, inner),
            _metric("mem% ", _frac(g.mem_util), f"{num(g.mem_util, '%'):>4}", h.mem, None, inner),
            _metric("power", pf, power_fig, power_hist, h.power, inner),
            Line()
            .add("vram  ")
            .add(bar(vram), _level(vram))
            .add(f" {mib(g.mem_used_mb)}/{mib(g.mem_total_mb)}  ")
            .add(f"{num(g.temp_c, 'C')}  P{num(g.pstate)}"),
            last,
        ]
        key = (w, box, tuple(top.segments), *(tuple(b.segments) for b in body))
        return self._same(("panel", g.index), key, lambda: self._rows(top, body, box, w))

    @staticmethod
    def _rows(top: Line, body: list[Line], box: str, w: int) -> list[list[Segment]]:
        inner = w - 4
        rows = [_cells(top, w)]
        for b in body:
            row = Line().add("│ ", box)
            row.segments += _cells(b, inner) if b.length > inner else b.segments
            row.length += min(b.length, inner)
            rows.append(_cells(row.pad_to(w - 2).add(" │", box), w))
        rows.append(_cells(Line().add("╰" + "─" * (w - 2) + "╯", box), w))
        return rows


def _cells(line: Line, width: int) -> list[Segment]:
    """`line.strip(width)`'s segments, without making a Strip unless it must be cut."""
    if line.length > width:
        return list(line.strip(width))
    if line.length < width:
        return [*line.segments, spaces(width - line.length)]
    return list(line.segments)


def _same_objects(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


_MARK = {"failed": "✖", "degraded": "!"}
HEALTH_STYLE = {"failed": "@hung", "degraded": "@stalled"}


def _metric(
    name: str,
    frac: float | None,
    figure: str,
    values: Sequence[float | None],
    power: Sequence[float | None] | None,
    inner: int,
) -> Line:
    """`util  ██████░░░░  97%  ▁▂▃▅▇█` with the history filling the panel's width."""
    line = Line().add(f"{name} ").add(bar(frac), _level(frac)).add(f" {figure}  ")
    spark(line, values, max(0, inner - line.length), power or None)
    return line


def _tag_text(tag: str) -> str:
    return tag.upper() if tag in ("spinning", "suspect") else tag


def _frac(v: float | None) -> float | None:
    return None if v is None else v / 100


def _vram_frac(g: GpuSample) -> float | None:
    if g.mem_used_mb is None or not g.mem_total_mb:
        return None
    return g.mem_used_mb / g.mem_total_mb
