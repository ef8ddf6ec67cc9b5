"""`--probe-blamed` for `merge` and `fleet`: after the job-wide verdict, the world probe of the
host it blames and that host's neighbours, joined to the verdict.

The verdict names the host and the exact command in its next steps whether or not this is
given (gputui.diagnose.merge.host_blame); the option runs it. `fleet` reaches the hosts the
way it reached them for `check` (ssh, srun or pdsh, the same ssh options); `merge`, which
read files, is told how with --probe-launcher. Exit status: the verdict's, and 3 (a sick
GPU, gputui.diagnose.exitcodes) when the probe names a broken host or link and no hang was
seen; a probe refused or failing changes nothing.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from gputui.commands.common import positive_float
from gputui.commands.probe_world import LAUNCHERS as WORLD_LAUNCHERS
from gputui.commands.probe_world import _port, require_launcher
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.diagnose.merge.merged import Merged
    from gputui.probe.world.model import WorldOptions


def add_options(p: argparse.ArgumentParser, *, launcher: bool) -> None:
    p.add_argument(
        "--probe-blamed",
        action="store_true",
        help="when the verdict blames a host (a sick GPU, a host that did not answer during "
        "the stall): run the world probe over it and its neighbours (gputui probe --hosts "
        "... --bisect) and join the answer",
    )
    p.add_argument(
        "--probe-port",
        type=_port,
        default=29500,
        metavar="P",
        help="with --probe-blamed: the world probe's rendezvous port on the blamed host "
        "(default 29500; its bisect uses P+1...)",
    )
    if launcher:
        p.add_argument(
            "--probe-launcher",
            choices=WORLD_LAUNCHERS,
            default="ssh",
            help="with --probe-blamed: how the world probe reaches the hosts (default ssh)",
        )
        p.add_argument(
            "--probe-timeout",
            type=positive_float,
            default=60.0,
            metavar="S",
            help="with --probe-blamed: seconds allowed per host and world (default 60)",
        )


def world_options(
    launcher: str,
    *,
    timeout: float,
    port: int = 29500,
    remote_gputui: str = "gputui",
    ssh_config: str | None = None,
    ssh_options: tuple[str, ...] = (),
    connect_timeout: float = 10.0,
    jobid: str | None = None,
) -> WorldOptions:
    """The world probe's options; GputuiError (one line, exit 2) for a launcher it lacks."""
    from gputui.probe.world.model import WorldOptions

    if launcher not in WORLD_LAUNCHERS:
        raise GputuiError(
            f"--probe-blamed: the world probe reaches hosts with ssh, srun or pdsh, not {launcher}"
        )
    require_launcher(launcher, "--probe-blamed")
    return WorldOptions(
        launcher=launcher,
        remote_gputui=remote_gputui,
        ssh_config=ssh_config,
        ssh_options=ssh_options,
        connect_timeout=connect_timeout,
        host_timeout=timeout,
        port=port,
        jobid=jobid,
    )


def probe_blamed(
    steps: list[Merged], opts: WorldOptions, code: int, as_json: bool
) -> tuple[list[Merged], int, dict[str, Any] | None]:
    """(steps with the last one joined, exit code, the probe's record); when the verdict
    blames no host, says so on stderr and returns them as they were (record None)."""
    from gputui.diagnose import exitcodes
    from gputui.diagnose.merge.host_probe import explain_host_probe, with_host_probe
    from gputui.probe.world.blamed_host import probe_blamed_host

    blame = steps[-1].blamed_host
    if blame is None:
        said = "--probe-blamed: the verdict blames no host's hardware; nothing to probe"
        print(said, file=sys.stderr)
        return steps, code, None

    def stage(what: str) -> None:
        if not as_json and sys.stderr.isatty():
            print(f"probe of {blame.host}: {what}", file=sys.stderr)

    rec, _rep = probe_blamed_host(blame, opts, stage)
    found = explain_host_probe(rec)
    steps = [*steps[:-1], with_host_probe(steps[-1], found)]
    if found.hardware:
        code = exitcodes.worst(code, exitcodes.SICK_GPU)
    return steps, code, rec
