"""`gputui merge`: many nodes' `check --json` lines -> the job-wide verdict.

    srun --overlap --jobid J -N 64 --ntasks-per-node=1 gputui check --json | gputui merge

Exit status as `check` over a replay: the worst job-wide verdict seen over the lines' span
(gputui.diagnose.merge.join.exit_code), so a stall that ended still exits 1; 3 for a sick GPU
when no job hung; 2 on bad input (a file that cannot be read, no check lines at all, a bad
--expect).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gputui.commands.common import positive_float
from gputui.errors import GputuiError

if TYPE_CHECKING:
    from gputui.diagnose.merge.merged import Merged
    from gputui.probe.world.model import WorldOptions


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "merge",
        help="join many nodes' `check --json` lines into one job-wide verdict",
        description=(
            "Read `gputui check --json` lines of many nodes (files, gzip, or standard input), "
            "align them in time and print the job-wide verdict: the GPUs that spin and the "
            "ones that do not (host:gpu), the suspect ranks, waiting and silent hosts, and the "
            "ranks' stacks grouped across nodes."
        ),
        epilog=exit_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("files", nargs="*", metavar="FILE", help="check --json output ('-': stdin)")
    p.add_argument("--json", action="store_true", help="one JSON line per job-wide change")
    p.add_argument(
        "--expect",
        metavar="HOSTS",
        default=None,
        help="the hosts that should have answered (node[01-64], a,b or @file): those that "
        "sent nothing are named silent",
    )
    p.add_argument(
        "--window",
        type=positive_float,
        default=2.0,
        metavar="S",
        help="changes closer than S seconds form one step (default 2)",
    )
    from gputui.commands.merge_after import add_options

    add_options(p, launcher=True)
    p.set_defaults(func=run)


def exit_epilog() -> str:
    """merge's and fleet's --help epilog: the exit table and the rule over a span."""
    from gputui.diagnose import exitcodes

    return (
        exitcodes.help_text()
        + "\nthe exit code is the worst verdict seen over the lines' span, as a replay's:\n"
        "a stall that ended before the last line still exits 1"
    )


def text_report(steps: list[Merged]) -> str:
    """What `merge` prints without --json: the changes, then the final verdict in full."""
    from gputui.diagnose.rank_lists import ranks_text
    from gputui.diagnose.states import is_alarm
    from gputui.textsafe import clean

    t0 = steps[0].t
    out = [f"gputui merge: {steps[-1].hosts} host(s), {len(steps)} step(s)"]
    for m in steps:
        out.append(f"+{m.t - t0:7.1f} s  {m.state.upper():8s} {m.reason}")
    last = steps[-1]
    out.append(f"final: {last.state}: {last.reason}")
    alarms = [m for m in steps if is_alarm(m.state)]
    if alarms and not is_alarm(last.state):
        when = ", ".join(f"+{m.t - t0:.1f} s" for m in alarms[:4])
        more = f" and {len(alarms) - 4} more" if len(alarms) > 4 else ""
        out.append(
            f"alarms: {len(alarms)} ({when}{more}), all cleared; the exit code is the worst "
            "verdict seen"
        )
    if last.suspects:
        ranks = f" ({ranks_text(last.suspect_ranks)})" if last.suspect_ranks else ""
        out.append(f"suspects: {', '.join(last.suspects)}{ranks}")
    if last.waiting_hosts:
        out.append(f"waiting hosts: {', '.join(last.waiting_hosts)}")
    if last.silent_hosts:
        out.append(f"silent hosts: {', '.join(last.silent_hosts)}")
    if last.blamed_host is not None:
        b = last.blamed_host
        out.append(f"blamed host: {b.host} ({b.why}); neighbours: {', '.join(b.neighbours) or '-'}")
    if last.stack_groups:
        out.append("stacks across hosts:")
        out += [f"  {g}" for g in last.stack_groups]
    for f in last.findings[:10]:
        out.append(f"  - {f}")
    if last.next_steps:
        out.append("next steps:")
        out += [f"  - {s}" for s in last.next_steps]
    return "\n".join(clean(line) for line in out)  # host and job names are anyone's


def merge_inputs(files: list[str], expect: str | None, window: float) -> list[Merged]:
    """Read, parse and merge; GputuiError on bad input."""
    import sys

    from gputui.collect.hostlist import expand_hosts
    from gputui.collect.report_reader import MAX_SKIPPED, ReadStats, read_reports
    from gputui.diagnose.merge.join import line_from_json, merge

    hosts: list[str] = []
    if expect is not None:
        try:
            hosts = expand_hosts(expect)
        except ValueError as e:
            raise GputuiError(f"--expect: {e}") from None
    stats = ReadStats()
    lines = []
    for host, obj in read_reports(files, stats):
        try:
            lines.append(line_from_json(obj, host))
        except ValueError as e:  # a key of the wrong shape: the line is skipped, said below
            stats.skip(str(e))
            if stats.skipped > MAX_SKIPPED:  # endless `{}` lines end too
                raise GputuiError(
                    f"{stats.where}: more than {MAX_SKIPPED} lines that are not "
                    "`gputui check --json` output"
                ) from None
    if not lines:
        other = f" ({stats.skipped} other line(s) skipped)" if stats.skipped else ""
        raise GputuiError(f"no `gputui check --json` lines in the input{other}")
    if stats.skipped:
        where = "; ".join(stats.examples)
        print(
            f"gputui: skipped {stats.skipped} line(s) that are not check --json output"
            + (
                f" ({where}{'; ...' if stats.skipped > len(stats.examples) else ''})"
                if where
                else ""
            ),
            file=sys.stderr,
        )
    return merge(lines, expect=hosts, window=window)


def run(args: argparse.Namespace) -> int:
    from gputui.commands.merge_after import world_options
    from gputui.diagnose.merge.join import exit_code  # the worst verdict seen, as `check` exits

    opts = None
    if args.probe_blamed:  # a launcher that is missing is said before anything is read
        opts = world_options(args.probe_launcher, timeout=args.probe_timeout, port=args.probe_port)
    steps = merge_inputs(args.files, args.expect, args.window)
    return report(steps, exit_code(steps), args.json, opts)


def report(steps: list[Merged], code: int, as_json: bool, opts: WorldOptions | None) -> int:
    """Print the steps (JSON lines or text), after the blamed host's probe when `opts` is
    given (--probe-blamed); the exit code, joined with the probe's."""
    import json

    from gputui.commands.merge_after import probe_blamed
    from gputui.diagnose.merge.merged import merged_to_json

    rec = None
    if opts is not None:
        steps, code, rec = probe_blamed(steps, opts, code, as_json)
    if as_json:
        for m in steps:
            d = merged_to_json(m)
            if rec is not None and m is steps[-1]:
                d["blamed_host_probe"] = rec
            print(json.dumps(d), flush=True)
    else:
        print(text_report(steps))
    return code
