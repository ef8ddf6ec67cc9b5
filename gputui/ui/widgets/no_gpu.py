"""The line under the banner on a node without GPUs: what to try instead.

Why its own widget: why there are no GPUs is the banner's (in full, above it); this line
says what the dashboard shows instead and where a first-time user can see a real hang.
"""

from __future__ import annotations

from textual.strip import Strip

from gputui.ui.widgets.strips import LineView, text_line

NO_GPU_HINT = "Try `gputui --demo` to replay a real NCCL hang recorded on 2 x H200."
NO_GPU_HINT_SHORT = "Busiest host processes below · try `gputui --demo`: a real NCCL hang"


class NoGpuNote(LineView):
    """What to try instead of GPU lines (host mode); why there are none is the banner's."""

    DEFAULT_CSS = "NoGpuNote { height: auto; }"

    def __init__(self) -> None:
        super().__init__(id="nogpu")
        self.error = ""

    def build(self, width: int) -> list[Strip]:
        """The hint, once: why there are no GPUs is the banner's line above (in full)."""
        if not self.error:
            return []
        hint = f" Showing the busiest host processes instead. {NO_GPU_HINT}"
        if len(hint) > width:  # the hint must be read whole: the short one at 80 columns
            hint = f" {NO_GPU_HINT_SHORT}"
        return [text_line(hint, width)]
