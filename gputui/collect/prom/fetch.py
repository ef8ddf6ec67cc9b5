"""A window of GPU history from the server: the queries, one exchange, the columns.

dcgm-exporter's names are asked first; when its utilization series is not there, gputui's
own exporter's names are asked instead (within the same deadline). Every reading of a
family goes out at once, in parallel: a metric a cluster does not export answers an empty
matrix, which costs the server nothing.
"""

from __future__ import annotations

import math
import time

from gputui.collect.prom.client import Server, fetch_ranges
from gputui.collect.prom.columns import SEEN, History, build
from gputui.collect.prom.names import FAMILIES, Family, selector
from gputui.errors import GputuiError

MAX_STEPS = 1_000_000  # a window of more steps than this is a mistake (a step of 1 s over weeks)


def queries(family: Family, match: str | None, nodes: tuple[str, ...]) -> dict[str, str]:
    """Column name -> PromQL for one family."""
    out = {r.field: selector(r.metric, family, match, nodes) for r in family.readings}
    out[SEEN] = f"timestamp({selector(family.util_metric, family, match, nodes)})"
    return out


def read_history(
    server: Server,
    start: float,
    end: float,
    step: float,
    *,
    match: str | None = None,
    nodes: tuple[str, ...] = (),
    job_label: str | None = None,
    deadline_s: float = 60.0,
    workers: int = 8,
) -> History:
    """The window's columns; GputuiError (exit 2) when no GPU series match.

    Args:
        server: the server (open_server).
        start: the window's start (Unix seconds).
        end: the window's end (Unix seconds).
        step: seconds between points.
        match: label matchers added to every query (`--match`); None: all GPUs.
        nodes: only these nodes' GPUs; (): all.
        job_label: the label that names a job (`--job-label`); None: namespace/pod.
        deadline_s: the bound on the whole exchange.
        workers: how many queries run at once.

    Returns:
        The window's History: every GPU's series in columns on the step grid.

    Raises:
        GputuiError: no GPU series match (exit 2), or the exchange with the server failed.
    """
    n = math.floor((end - start) / step + 1e-9) + 1
    if n > MAX_STEPS:
        raise GputuiError(
            f"--step {step:g} s over {end - start:.0f} s is {n} steps: use a larger --step"
        )
    began = time.monotonic()
    for family in FAMILIES:
        left = deadline_s - (time.monotonic() - began)
        qs = queries(family, match, nodes)
        got = fetch_ranges(server, list(qs.values()), start, end, step, left, workers)
        series = {f: got[q] for f, q in qs.items()}
        if series.get("util"):
            return build(family, series, start, step, n, job_label)
    names = " or ".join(f.util_metric for f in FAMILIES)
    what = f" matching {{{match}}}" if match else ""
    what += f" on {', '.join(nodes[:4])}{' ...' if len(nodes) > 4 else ''}" if nodes else ""
    raise GputuiError(f"Prometheus at {server.shown} has no {names} series{what} in the window")
