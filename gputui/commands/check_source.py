"""The life of `gputui check`'s source: a recording read whole, then released in order.

Why apart from the command: a replay is read before the first verdict with the cyclic
garbage collector kept off its millions of samples (issue 34), and whatever ends the run,
the Watcher, the profiler and the source are closed, and the samples thawed, in that order.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gputui.commands.common import open_source

if TYPE_CHECKING:
    from gputui.collect.source import Source
    from gputui.tools.attach.profile import StragglerProfiler
    from gputui.watch.run import WatchRun

__all__ = ["read_recording", "release"]


def release(
    run: WatchRun | None, profiler: StragglerProfiler | None, source: Source, live: bool
) -> None:
    """Close what run() opened, in order; the source is closed and a replay's samples
    thawed even when closing the watcher or the profiler raises."""
    try:
        if run is not None:
            run.close()
        if profiler is not None:
            profiler.close()
    finally:
        try:
            source.close()
        finally:
            if not live:
                import gc

                gc.unfreeze()  # see read_recording: collectable again for a caller in-process


def read_recording(args: argparse.Namespace) -> Source:
    """The replay's source, read whole before the first verdict, with the cyclic garbage
    collector kept off its samples: the reader makes millions of small objects, none in a
    cycle, and each collection walked all those read so far (a third of a day-long
    replay's reading, issue 34). Paused while it reads (this thread is the only one), then
    the samples, which live to the end of the command, are frozen out of later
    collections (until run() ends), so the Watcher's own objects are collected as usual."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        source = open_source(args, realtime=False)
    finally:
        if was:
            gc.enable()
    gc.freeze()
    return source
