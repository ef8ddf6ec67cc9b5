"""The first frame before Textual: a header and one line per GPU, in plain text.

Why: importing Textual takes longer (~0.2 s) than opening NVML and taking the first sample,
which a thread does meanwhile (gputui.commands.app). As soon as that sample is in, the thread
draws it here, on the terminal's alternate screen, the screen Textual then takes over and
repaints: the GPUs are on screen before the dashboard has loaded.

Safe by construction: it draws only when stdin, stdout and stderr are all terminals (as the
dashboard requires), at most once, and never after `close()` (called just before Textual
starts) or `leave()`. When the dashboard does not start after all (a bad option, NVML's
error, Ctrl-C while it loads), `leave()` goes back to the normal screen, so the error is
printed where the shell's text is, as it was. No Textual here: it runs before Textual loads.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from gputui.textsafe import clean
from gputui.ui.widgets.format import mib, num

ENTER = "\x1b[?1049h\x1b[H\x1b[2J"  # the alternate screen (as Textual uses), cleared
LEAVE = "\x1b[?1049l"  # back to the normal screen, restored as it was


# TERM values of a terminal that cannot move the cursor (Emacs' shell, some CI consoles):
# no pre-frame there, and gputui.commands.app refuses the dashboard with one line.
DUMB_TERMS = ("dumb", "unknown")


def _terminals() -> bool:
    if os.environ.get("TERM", "") in DUMB_TERMS:
        return False
    streams = (sys.stdin, sys.stdout, sys.stderr)
    try:
        return all(s is not None and s.isatty() for s in streams)
    except (OSError, ValueError):
        return False


def lines(snap: Any, description: str, width: int, height: int) -> list[str]:
    """The header and one line per GPU (as many as fit), each at most `width` columns."""
    host = clean(getattr(snap, "hostname", None) or "", limit=64)
    head = [p for p in ("gputui", host, clean(description, limit=80), "loading…") if p]
    out = [" · ".join(head)]
    if not snap.gpus:
        why = clean(snap.gpu_error or "this node reports no GPUs", limit=200)
        out.append(f" No GPUs: {why}")
    for g in snap.gpus[: max(0, height - 2)]:
        pf = g.power_frac
        power = f"{num(g.power_w)}/{num(g.power_limit_w)}W" + (f" {pf * 100:.0f}%" if pf else "")
        name = clean(g.name or "GPU", limit=24)
        out.append(
            f"{g.index:>2} {name:<24} util {num(g.util, '%'):>4}  mem {num(g.mem_util, '%'):>4}"
            f"  {power:<14} vram {mib(g.mem_used_mb)}/{mib(g.mem_total_mb)}  {num(g.temp_c, 'C')}"
        )
    return [ln[:width] for ln in out]


class PreFrame:
    """Draws the first sample once, before Textual, from any thread."""

    def __init__(
        self, stream: IO[str] | None = None, is_terminal: Callable[[], bool] = _terminals
    ) -> None:
        self._stream = stream if stream is not None else sys.__stderr__  # where Textual draws
        self._is_terminal = is_terminal
        self._lock = threading.Lock()
        self._closed = False
        self.drawn = False

    @property
    def active(self) -> bool:
        """It would draw: a terminal on all three streams, not closed, nothing drawn yet."""
        return (
            not self._closed
            and not self.drawn
            and self._stream is not None
            and (self._is_terminal())
        )

    def draw(self, snap: Any, description: str) -> bool:
        """Draw `snap` (a Snapshot); False when it may not (closed, drawn, not a terminal)."""
        with self._lock:
            stream = self._stream
            if self._closed or self.drawn or stream is None or not self._is_terminal():
                return False
            try:
                cols, rows = os.get_terminal_size(stream.fileno())
                text = "\r\n".join(lines(snap, description, cols or 80, rows or 24))
                self.drawn = True  # from the first byte on: leave() must undo it
                stream.write(ENTER + text)
                stream.flush()
            except (OSError, ValueError):
                return self.drawn
            return True

    def close(self) -> None:
        """Textual takes the screen from here (it enters the same alternate screen and
        leaves it at its exit): nothing more is drawn."""
        with self._lock:
            self._closed = True

    def leave(self) -> None:
        """The dashboard does not start after all: back to the normal screen."""
        with self._lock:
            self._closed = True
            if not self.drawn or self._stream is None:
                return
            self.drawn = False
            try:
                self._stream.write(LEAVE)
                self._stream.flush()
            except (OSError, ValueError):
                pass
