"""Start the dashboard (the default when no subcommand is given)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from gputui.commands.common import check_detector_args, open_source
from gputui.commands.lean import one_malloc_arena, without_tls
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.collect.source import Source
    from gputui.ui.widgets.preframe import PreFrame

NVML_START_TIMEOUT = 15.0  # seconds for nvmlInit and the device list before giving up
PREFRAME_WAIT_S = 1.0  # at most this long for the plain-text first frame before Textual loads


def _open_in_background(
    args: argparse.Namespace, pre: PreFrame | None = None
) -> tuple[threading.Thread, list]:
    """Open the source (nvmlInit, device list) and take its first sample, in a thread.

    Both overlap with importing Textual (~0.2-0.3 s), and the first frame can then show the
    GPUs at once instead of a "waiting" screen and a second layout pass; a driver that does
    not answer cannot hang the start: the wait is bounded. With `pre`, the sample is drawn
    at once in plain text (gputui.ui.widgets.preframe), while Textual is still importing.
    """
    from gputui.collect.source import NoSuchGpus

    result: list = []

    def work() -> None:
        try:
            # The GPUs' first reading is drawn as soon as NVML answers, before psutil and
            # the health monitor are imported (gputui.collect.live); a recording is read on
            # while it plays: a day-long one starts at once.
            source: Source
            if getattr(args, "prometheus", None):  # a node's history: commands/prom_replay
                from gputui.commands.prom_replay import prom_source

                source = prom_source(args)
            else:
                source = open_source(
                    args,
                    realtime=True,
                    timeout=NVML_START_TIMEOUT,
                    on_gpus=None if pre is None else pre.draw,
                    lazy=True,
                )
        except BaseException as e:  # re-raised in the main thread
            result.append(e)
            return
        try:
            first = source.sample()
        except NoSuchGpus as e:  # bad input: said before the UI, as in every face
            source.close()
            result.append(e)
            return
        except Exception:  # the sampler will try again and report it
            first = None
        result.append((source, first))
        if pre is not None and first is not None:  # a replay, --gpus, or no early reading
            pre.draw(first, getattr(source, "description", source.kind))

    t = threading.Thread(target=work, name="gputui-open-source", daemon=True)
    t.start()
    return t, result


def require_terminal() -> None:
    """The dashboard needs a terminal on stdin (keys), stdout and stderr (Textual draws on
    stderr). Without one (`ssh node gputui` with no -t, `gputui | cat`, cron), it would draw
    escape codes into a pipe and ignore every key, and when ssh went away it kept running:
    say so once and stop instead."""
    missing = [
        name
        for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout), ("stderr", sys.stderr))
        if stream is None or not stream.isatty()
    ]
    if missing:
        raise GputuiError(
            f"the dashboard needs a terminal, and {'/'.join(missing)} is not one: over ssh "
            "use `ssh -t HOST gputui`; for scripts use `gputui snapshot` or `gputui check`"
        )
    from gputui.ui.widgets.preframe import DUMB_TERMS

    term = os.environ.get("TERM", "")
    if term in DUMB_TERMS:  # Emacs' shell, some CI consoles: no cursor to move
        raise GputuiError(
            f"the dashboard needs a terminal that can move the cursor, and TERM={term} "
            "cannot: use `gputui snapshot` or `gputui check` here, or a real terminal "
            "(TERM=xterm-256color)"
        )


def run(args: argparse.Namespace) -> int:
    check_detector_args(args)
    # A lost terminal (ssh dropped, tmux pane killed) must end gputui even when the shell
    # that started it ignored SIGHUP (nohup, some job launchers).
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    one_malloc_arena()  # before any thread starts (gputui.commands.lean says why)
    from gputui.ui.widgets.preframe import PreFrame

    pre = PreFrame()
    thread, result = _open_in_background(args, pre)
    if pre.active:
        # The GPUs on screen first: importing Textual now would hold the GIL against the
        # thread's Python (pynvml, psutil, the sample) and delay that plain-text frame ~2x.
        thread.join(PREFRAME_WAIT_S)
    try:
        app = _make_app(args, thread, result)
    except BaseException:
        pre.leave()  # the error is said on the normal screen, which is left as it was
        raise
    pre.close()  # Textual takes the screen over from here
    from gputui.ui.calm_input import calm_input

    calm_input()  # Textual's key thread wakes 2 times a second at rest, not 10
    try:
        app.run(mouse=not args.no_mouse)
    finally:
        app.sampler.stop()
        # `q` must not wait on nvmlShutdown (a wedged driver would hold it): the exit that
        # follows releases NVML. Replays have nothing to leave and just close.
        getattr(app.source, "leave", app.source.close)()
    # A crash inside the UI is reported by Textual and must not look like a clean exit.
    return app.return_code or 0


def _make_app(args: argparse.Namespace, thread: threading.Thread, result: list) -> Any:
    """The app on the opened source, once the source is open (or its error raised)."""
    from gputui.watch.settings import WatchSettings

    GputuiApp = _app_class()
    replay = getattr(args, "demo", False) or getattr(args, "replay", None) is not None
    replay = replay or bool(getattr(args, "prometheus", None))  # bounded by --prom-timeout
    # A replay is read by the bounded reader (trace_read), which ends on its own. NVML bounds
    # itself (and names the call that hung); for a live start this wait is a backstop.
    thread.join(None if replay else NVML_START_TIMEOUT + 1.0)
    if not result:
        raise GputuiError(
            f"NVML did not open within {NVML_START_TIMEOUT:.0f} s (is the driver hung? try "
            "nvidia-smi); `gputui --demo` works without a GPU"
        )
    if isinstance(result[0], BaseException):
        raise result[0]  # a bad recording or NVML's error first: what the user must fix
    world = _world_probe_args(args)  # a bad host list is said before the terminal check
    theme = _theme(args)  # and so is a bad theme
    require_terminal()
    source, first = result[0]
    story = None
    if getattr(args, "demo", False):
        from gputui.ui.actions.story import DemoStory

        # the demo holds at each finding until the user goes on; its recording says when
        # each hang starts (the countdown on the story bar)
        story = DemoStory(snaps=getattr(getattr(source, "inner", source), "snaps", None))
    return GputuiApp(
        source,
        probe_args=world,
        first=first,
        settings=WatchSettings.from_args(args),  # the app decides `live` from the source
        watch_terminal=True,
        story=story,
        theme=theme,
    )


def _app_class() -> Any:
    """GputuiApp, with Textual (and asyncio) imported without TLS: about 4 MB less resident
    (gputui.commands.lean). A Textual that needed ssl to import is imported as it is."""
    try:
        with without_tls():
            from gputui.ui.app import GputuiApp
    except ImportError as e:
        if e.name != "ssl":
            raise
        from gputui.ui.app import GputuiApp
    return GputuiApp


def _theme(args: argparse.Namespace) -> str | None:
    """`--theme NAME` (or $GPUTUI_THEME): one of Textual's themes, else one line, exit 2."""
    name, said = getattr(args, "theme", None), "--theme"
    if name is None:
        name, said = os.environ.get("GPUTUI_THEME") or None, "$GPUTUI_THEME"
    if name is None:
        return None
    from gputui.ui.widgets.palette import theme_names

    themes = theme_names()
    if name not in themes:
        names = ", ".join(themes)
        raise GputuiError(f"{said}: no theme {name!r}; the themes are: {names}")
    return str(name)


def _world_probe_args(args: argparse.Namespace) -> dict[str, object] | None:
    """`--probe-hosts LIST`: the probe key (P) runs the whole-world probe over those hosts."""
    text = getattr(args, "probe_hosts", None)
    if text is None:
        return None
    from gputui.collect.hostlist import hosts_option

    hosts = hosts_option(text, "--probe-hosts", whole=True)
    return {"world_hosts": hosts, "launcher": getattr(args, "probe_launcher", "ssh")}
