"""Allow `python -m gputui` (through the entry point: Ctrl-C during start-up is quiet).

The SIGINT handler is put in place before anything else is imported (through the C
`_signal` module, already loaded), so that an interrupt while gputui.entry itself loads is
quiet too; gputui.entry takes over from it.
"""

import _signal
import os


def _early(signum: int, frame: object) -> None:
    os._exit(130)


_early.gputui_early = True  # type: ignore[attr-defined]  # gputui.entry replaces it
if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _early)

from gputui.entry import main  # noqa: E402

raise SystemExit(main())
