"""`C`: every GPU's clocks and why they are held down (NVML's clock event reasons).

Why a pane: a GPU that runs slower than its peers (a straggler, a job slower than last
week) is first asked "is it held down?": its SM clock, and the reasons NVML gives for it
(power cap, HW slowdown, thermal, power brake). The board's panel view shows the clocks but
not the reasons; `nvidia-smi -q -d PERFORMANCE` shows them for one GPU at a time. Here they
are for every GPU at once, side by side, the hardware's own reasons in the alert colour.

Its data is the Snapshot on screen (GpuSample.events, read by the sampler thread; in a
replay, the recording's): the pane never calls NVML. It follows the dashboard: a new sample
on screen redraws it (checked once a second, by identity: no work while nothing changed).
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

from gputui.collect.model import GpuSample, Snapshot
from gputui.collect.nvml.reader import GPU_UNREADABLE
from gputui.diagnose.slow.clocks import clock_reasons, hardware_slowdown
from gputui.ui.keys import screen_bindings
from gputui.ui.widgets.format import num
from gputui.ui.widgets.palette import role
from gputui.ui.widgets.safe_text import Static, Text

TITLE = "clocks and why they are held down"
HEAD = f"{'GPU':>3}  {'SM':>8}  {'memory':>8}  {'P':>3}  {'temp':>4}  {'power':>11}  reasons"


def _reasons(g: GpuSample) -> tuple[str, str]:
    """(the clock event reasons in words, their style): the hardware's own in the alert
    colour, the ordinary ones (idle, power cap) plain."""
    if g.events is None:
        return ("not reported", "dim")
    if hardware_slowdown(g.events):
        return (", ".join(clock_reasons(g.events)), "@alert")
    return (", ".join(clock_reasons(g.events)) or "none", "")


def _power(g: GpuSample) -> str:
    if g.power_w is None:
        return "N/A"
    limit = f"/{g.power_limit_w:.0f}" if g.power_limit_w else ""
    return f"{g.power_w:.0f}{limit} W"


def clocks_text(snap: Snapshot | None) -> Text:
    """One line per GPU: SM and memory clocks, P-state, temperature, power, the reasons."""
    t = Text()
    if snap is None:
        return t.append("No sample yet.")
    if not snap.gpus:
        return t.append("No GPUs on this node: nothing has clocks to show.")
    t.append(HEAD + "\n", style="bold")
    for g in snap.gpus:
        if GPU_UNREADABLE in g.na:
            t.append(f"{g.index:>3}  no reading: {g.na[GPU_UNREADABLE]}\n", style=role("@alert"))
            continue
        pstate = f"P{g.pstate}" if g.pstate is not None else "N/A"
        t.append(
            f"{g.index:>3}  {num(g.sm_mhz, ' MHz'):>8}  {num(g.mem_mhz, ' MHz'):>8}  "
            f"{pstate:>3}  {num(g.temp_c, 'C'):>4}  {_power(g):>11}  "
        )
        words, style = _reasons(g)
        t.append(words + "\n", style=role(style) if style else None)
    return t


class ClocksScreen(ModalScreen[None]):
    """The clocks pane over the dashboard; escape or q closes it."""

    BINDINGS = screen_bindings("clocks")
    DEFAULT_CSS = """
    ClocksScreen { align: center middle; }
    ClocksScreen > VerticalScroll { width: 100%; max-width: 110; height: auto;
        max-height: 100%; border: round $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.shown: Snapshot | None = None

    def _snapshot(self) -> Snapshot | None:
        return getattr(self.app, "snapshot", None)

    def compose(self) -> ComposeResult:
        self.shown = self._snapshot()
        with VerticalScroll():
            yield Static(Text(f"{TITLE}  (esc closes)", style="bold"))
            yield Static(clocks_text(self.shown), id="clocks-body")

    def on_mount(self) -> None:
        self.set_interval(1.0, self.follow)

    def follow(self) -> None:
        """Redraw when the dashboard has a newer sample on screen than the one shown."""
        snap = self._snapshot()
        if snap is not self.shown:
            self.shown = snap
            self.query_one("#clocks-body", Static).update(clocks_text(snap))

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
