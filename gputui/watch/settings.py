"""How a face wants its verdicts judged: one frozen object instead of loose arguments.

Why: `--stall-after`, `--hang-after`, `--busy-limit`, auto-dump, whether the source is live
and which gatherers run used to travel as loose pairs through every signature between the
command line and the Watcher (13 signatures in 9 files). A new option then touched each of
them. Now a face builds one `WatchSettings` (from its parsed arguments, `from_args`) and
hands it on whole; only the pure detector keeps its own two numbers
(gputui.diagnose.hang.detector), and it is built in one place (`Watcher.detector`).

Frozen: a setting never changes under a running Watcher, and one object can be shared
between the dashboard's Watcher and the bundle it writes (`dataclasses.replace` derives a
variant, e.g. the replay of a live setting).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any

from gputui.watch.gatherers import BUSY_LIMIT_S, DEFAULT_GATHERERS, Explain, Gather

__all__ = ["WatchSettings"]


@dataclass(frozen=True)
class WatchSettings:
    """Every option of a Watcher (the defaults are the command line's defaults).

    Attributes:
        stall_after: seconds a job's GPUs spin before it is stalled (--stall-after).
        hang_after: seconds before a stalled job is hung (--hang-after).
        busy_limit: seconds a job may stay busy before that is an alarm too (--busy-limit).
        auto_dump: py-spy the ranks of a job that stalls (not --no-auto-dump).
        live: the snapshots are this machine's, now: gatherers may run (False: a replay,
            whose evidence is the recorded one).
        host_ranks: the snapshots are this host's, so its own waiting ranks (a rendezvous
            that never completes) may become the verdict (False: synthetic samples).
        gatherers: (kind, gather, explain) per kind of evidence gathered at a stall.
    """

    stall_after: float = 10.0
    hang_after: float = 60.0
    _: KW_ONLY
    busy_limit: float = BUSY_LIMIT_S
    auto_dump: bool = True
    live: bool = True
    host_ranks: bool = True
    gatherers: Sequence[tuple[str, Gather, Explain]] = DEFAULT_GATHERERS

    @classmethod
    def from_args(cls, args: argparse.Namespace, **over: Any) -> WatchSettings:
        """The settings a command's parsed options ask for.

        Args:
            args: the command's namespace; options it does not have take their defaults
                (`snapshot` has no --no-auto-dump, `bundle` sets the thresholds itself).
            **over: fields the command decides itself (e.g. `live=False` for a replay).

        Returns:
            The settings, with the debug server's options bound into the gatherers.
        """
        from gputui.watch.gatherers import with_debug_server

        gatherers = with_debug_server(
            server=getattr(args, "debug_server", None),
            dump_dir=getattr(args, "debug_dump_dir", None),
        )
        made = cls(
            getattr(args, "stall_after", 10.0),
            getattr(args, "hang_after", 60.0),
            busy_limit=getattr(args, "busy_limit", BUSY_LIMIT_S),
            auto_dump=not getattr(args, "no_auto_dump", False),
            gatherers=gatherers,
        )
        return replace(made, **over) if over else made

    @classmethod
    def of(
        cls, settings: WatchSettings | float | None = None, *loose: Any, **kw: Any
    ) -> WatchSettings:
        """`settings` itself, or settings built from the loose form a test or a script
        writes by hand (`Watcher(1.0, 60.0, live=False)`): the same fields, in order.

        Args:
            settings: a WatchSettings, or stall_after as a number, or None (the defaults).
            *loose: hang_after, when `settings` is a number.
            **kw: the other fields by name.

        Returns:
            The settings.
        """
        if isinstance(settings, WatchSettings):
            if loose or kw:
                raise TypeError("pass a WatchSettings or loose options, not both")
            return settings
        first = () if settings is None else (settings,)
        return cls(*first, *loose, **kw)

    def live_if(self, live: bool) -> WatchSettings:
        """These settings, for snapshots that are this machine's now (`live`) or not."""
        return self if live == self.live else replace(self, live=live)
