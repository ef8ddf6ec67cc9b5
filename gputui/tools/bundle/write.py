"""The incident bundle: everything needed to look at a hang later, in one directory.

When a job hangs, the person on the node has minutes before someone kills it. The bundle
freezes what gputui knows at that moment: recent samples (a replayable trace), the
detector's verdict, every GPU process's Python stacks, command line, environment (secrets
redacted), the CUDA/NCCL/torch libraries it actually loaded, and the node's topology.
Every part is optional: what could not be had is written down as a note, never skipped
silently.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from gputui.collect.model import ProcessInfo, Snapshot
from gputui.errors import GputuiError
from gputui.jsonout import dumps
from gputui.textsafe import clean
from gputui.tools.attach.dumpall import DumpAll, dump_all, group_dumps, stacks_record
from gputui.tools.bundle.host_json import live_host, recorded_host
from gputui.tools.bundle.processes import process_record
from gputui.tools.bundle.readme import readme_lines
from gputui.tools.bundle.safedir import write_new
from gputui.tools.result import Cancel, LineSink, Outcome
from gputui.tools.runner import run_tool
from gputui.tools.which import find_tool

TOPO_TIMEOUT_S = 10.0
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def default_bundle_dir(host: str | None = None, now: float | None = None) -> Path:
    """Where a bundle goes when no --out is given: `gputui-bundle-HOST-YYYYmmdd-HHMMSS` here.

    Args:
        host: the host's name; None: this machine's.
        now: the time stamped (Unix seconds); None: now.

    Returns:
        The relative path.
    """
    stamp = datetime.fromtimestamp(now if now is not None else time.time()).strftime(
        "%Y%m%d-%H%M%S"
    )
    return Path(f"gputui-bundle-{host or socket.gethostname()}-{stamp}")


def detector_verdict(snapshots: Sequence[Snapshot], stall_after: float, hang_after: float) -> Any:
    """The hang detector's verdict at the last snapshot (None without one), by the pure
    core's own loop over a recording (tools sit below gputui.watch, whose run the faces
    use); raises ImportError when the detector is not built."""
    from gputui.diagnose.hang.detector import diagnose_trace  # lazily: diagnose is optional

    verdicts = diagnose_trace(snapshots, stall_after, hang_after)
    return verdicts[-1] if verdicts else None


def verdict_with_stacks(
    verdict: Any,
    res: DumpAll,
    processes: Sequence[ProcessInfo | int],
    snap: Snapshot | None,
) -> tuple[Any, dict[str, Any] | None]:
    """A stalled verdict that has no stacks yet (no auto-dump ran) gets the bundle's own
    dumps of the stalled job's ranks, read the same way as an auto-dump: findings, the
    culprit frame and per-rank stacks end up in verdict.json. Returns the verdict and the
    stacks record it was read from (None when nothing was added), which the trace keeps so
    that a replay of it reads the same."""
    from gputui.diagnose.verdict import Verdict

    if not isinstance(verdict, Verdict) or not verdict.alarm or verdict.stacks:
        return verdict, None
    from gputui.diagnose.evidence import fold
    from gputui.diagnose.hang.culprit import explain_stacks

    gpus = set(verdict.spinning) | set(verdict.suspects)
    infos = [p for p in processes if isinstance(p, ProcessInfo) and p.live and set(p.gpus) & gpus]
    pids = {p.pid for p in infos}
    dumps = tuple(d for d in res.dumps if d.pid in pids)
    if not dumps:
        return verdict, None  # a replay, or none of the job's processes: nothing to add
    job = DumpAll(group_dumps(dumps), dumps, res.elapsed_s)
    t = max(time.time(), snap.t if snap is not None else 0.0)  # at or after the last sample
    rec = stacks_record(job, t=t, job="", trigger=verdict.state, processes=infos)
    return fold(verdict, [explain_stacks(rec, verdict, snap)]), rec


@dataclass
class BundleReport:
    path: Path
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    failed_dumps: int = 0
    headline: str | None = None  # the verdict's state and headline, for the summary

    outcome = Outcome.DONE

    @property
    def ok(self) -> bool:
        return True

    def summary_lines(self) -> list[str]:
        head = f"bundle written to {self.path} ({len(self.files)} files, {self.elapsed_s:.1f} s)"
        return [head, *(f"note: {n}" for n in self.notes)]


NAME_MAX = 255  # bytes in one file name (Linux); PATH_MAX in a whole path
PATH_MAX = 4096


def write_bundle(out_dir: str | Path | None = None, **kw: Any) -> BundleReport:
    """Write the bundle into a new hidden directory beside `out_dir`, then rename it there:
    a full disk, a Ctrl-C or a SIGTERM leaves no half bundle, and a symbolic link anywhere
    in `out_dir` is refused (gputui.tools.bundle.safedir), so a planted link cannot
    redirect the write. Keyword arguments are `_fill`'s.

    Args:
        out_dir: the bundle's directory; None: default_bundle_dir() of the host.
        **kw: what goes in: the samples, processes, verdict, bounds and tools (`_fill`'s keywords).

    Returns:
        The BundleReport: the directory, the files written, notes, the time taken, failed dumps, the
        headline.
    """
    snapshots = kw.get("snapshots", ())
    last = snapshots[-1] if snapshots else None
    host = (last.hostname if last and last.hostname else None) or kw.get("recorded_node")
    out = Path(out_dir) if out_dir is not None else default_bundle_dir(host or socket.gethostname())
    too_long = [p for p in out.parts if len(os.fsencode(p)) > NAME_MAX]
    if too_long or len(os.fsencode(str(out.absolute()))) > PATH_MAX:  # before creating any
        raise GputuiError(f"cannot write the bundle to {out}: File name too long")
    from gputui.tools.bundle.safedir import PartialDir

    try:  # a parent that is a file or a link, no permission: one line, not a traceback
        part = PartialDir(out)
    except OSError as e:
        raise GputuiError(f"cannot create {out}: {e.strerror or e}") from None
    try:
        rep = _fill(part.path, **kw)
        part.finish()  # atomic; replaces an empty directory at `out`
    except BaseException as e:
        renamed = part.done  # the swap check failed after the rename: nothing to remove
        part.discard()
        if isinstance(e, OSError):
            raise GputuiError(
                f"cannot write the bundle to {out}: {e.strerror or e} (no bundle was left there)"
            ) from None
        if isinstance(e, GputuiError) and not renamed:
            raise GputuiError(f"{e} (no bundle was left at {out})") from None
        raise
    finally:
        part.close()
    rep.path = out
    return rep


def _fill(
    out: Path,
    *,
    snapshots: Sequence[Snapshot] = (),
    processes: Sequence[ProcessInfo | int] | None = None,
    verdict: Any | None = None,
    stall_after: float = 10.0,
    hang_after: float = 60.0,
    dump_timeout: float | None = None,
    topo_timeout: float = TOPO_TIMEOUT_S,
    on_line: LineSink | None = None,
    cancel: Cancel | None = None,
    tool_path: str | None = None,
    recorded_node: str | None = None,
    made_from: str | None = None,
    records: Sequence[dict[str, Any]] = (),
) -> BundleReport:
    """Write the bundle into the empty directory `out`; `processes` defaults to every GPU
    process of the newest snapshot.

    `recorded_node`: the samples are a replay of that node's recording (`made_from` says
    which: "the recording X"), so the bundle is named for it and holds only what the
    recording holds: its samples, its stacks and evidence, its verdict. Nothing of the
    machine that writes it: not its topology, its kernel log, its processes, their logs
    or libraries, nor its tools and settings (each would describe another node).
    `records`: the evidence the verdict was read from that the samples do not carry (the
    Watcher's), written into the trace with the samples' own (gputui.tools.bundle.trace)."""
    start = time.monotonic()
    last = snapshots[-1] if snapshots else None
    host = (last.hostname if last and last.hostname else None) or recorded_node
    host = host or socket.gethostname()
    rep = BundleReport(out)
    say = on_line or (lambda _s: None)

    def write(name: str, text: str) -> None:
        if name.endswith(".txt"):  # stacks quote command lines: no raw escapes in files
            text = clean(text, keep_newlines=True, keep_tabs=True)
        text = text if text.endswith("\n") else text + "\n"
        write_new(out, name, text.encode("utf-8", errors="surrogateescape"))
        rep.files.append(name)

    def dump_json(name: str, obj: Any) -> None:
        write(name, dumps(obj, indent=2, default=str))

    # Verdict (written after the stacks, which it may quote).
    try:
        if verdict is None and snapshots:
            verdict = detector_verdict(snapshots, stall_after, hang_after)
        if verdict is None:
            rep.notes.append("no verdict: there were no samples to judge")
    except ImportError:
        rep.notes.append("no verdict: the hang detector (gputui.diagnose) is not in this build")
    except (
        Exception
    ) as e:  # the detector is another team's code: a bug there must not lose the bundle
        rep.notes.append(f"no verdict: the detector failed ({type(e).__name__}: {e})")

    # Which processes.
    if processes is None:
        processes = [p for p in (last.processes if last else ()) if p.gpus]
    if not processes and recorded_node is None:  # a replay has its recorded stacks
        rep.notes.append("no GPU processes: no stacks to take")

    # Stacks, in parallel.
    if processes:
        say(f"dumping the Python stacks of {len(processes)} process(es) with py-spy")
        res = dump_all(
            list(processes), timeout=dump_timeout, cancel=cancel, tool_path=tool_path, on_line=say
        )
        for d in res.dumps:  # tool output is redacted where it is read (tools.runner)
            body = [*d.result.lines, "", d.result.summary()]
            write(f"stacks/pid-{d.pid}.txt", "\n".join(body))
            if not d.result.ok:
                rep.failed_dumps += 1
                rep.notes.append(d.result.summary())
        write("stacks/groups.txt", "\n".join(t for t, _ in res.render()))
        verdict, own = verdict_with_stacks(verdict, res, processes, last)
        if own is not None:
            records = [*records, own]

        say("reading command lines, environments and libraries")
        dump_json("processes.json", [process_record(p) for p in processes])

    try:  # each rank's log tail and the kernel's lines about processes: this machine's
        from gputui.tools.bundle.lastwords import bundle_files

        for name, text in bundle_files(processes or (), verdict) if recorded_node is None else ():
            write(name, text)
    except Exception as e:  # a log of any shape must not lose the bundle
        rep.notes.append(f"lastwords: not written ({type(e).__name__}: {e})")

    # Samples and evidence: the same format `gputui --replay` reads, replaying to the verdict.
    if snapshots:
        from gputui.tools.bundle.trace import all_records, write_trace

        evidence = all_records(snapshots, records)
        say(f"writing {len(snapshots)} samples and {len(evidence)} records to trace.jsonl.gz")
        rep.notes += write_trace(out / "trace.jsonl.gz", snapshots, evidence, host)
        rep.files.append("trace.jsonl.gz")
        if not any(s.gpus for s in snapshots):  # each sample a `nogpu` record: it replays
            rep.notes.append("no GPUs here: trace.jsonl.gz holds the host's processes")
    else:
        rep.notes.append("no samples: trace.jsonl.gz not written")

    served = (getattr(verdict, "evidence", None) or {}).get("debugserver")
    if served:  # every rank's line, as the job's PyTorch debug server gave it
        from gputui.diagnose.nccl.debugserver import report_lines

        write("debugserver.txt", "\n".join(report_lines(served)))
    if verdict is not None and getattr(verdict, "reason", None):
        rep.headline = f"{str(getattr(verdict, 'state', '?')).upper()}: {verdict.reason}"
    if verdict is not None:
        try:
            to_json = getattr(verdict, "to_json", None)
            dump_json("verdict.json", to_json() if callable(to_json) else {"verdict": str(verdict)})
        except Exception as e:  # another layer's object: its bug must not lose the bundle
            rep.notes.append(f"no verdict: it could not be written ({type(e).__name__}: {e})")

    recorded = getattr(verdict, "stacks", None) if verdict is not None else None
    if recorded_node is not None and recorded:
        from gputui.diagnose.hang.recorded_stacks import recorded_lines

        write("stacks/groups.txt", "\n".join(recorded_lines(list(recorded))))
    # GPU health: every GPU's word, its counters, the Xids with their kernel-log lines.
    if snapshots:
        from gputui.diagnose.health.report import bundle_health

        health = bundle_health(snapshots)
        if health is not None:
            dump_json("health.json", health)

    # Topology.
    smi = find_tool("nvidia-smi", tool_path)
    if recorded_node is not None:
        rep.notes.append(f"a replay of {recorded_node}: topology not recorded")
    elif smi is None:
        write("topology.txt", "nvidia-smi not found: topology missing\n")
        rep.notes.append("nvidia-smi not found: topology missing")
    else:
        say("nvidia-smi topo -m")
        topo = run_tool([smi, "topo", "-m"], timeout=topo_timeout, cancel=cancel)
        text = "\n".join(_ANSI.sub("", ln) for ln in topo.lines)
        if not topo.ok:
            rep.notes.append(f"nvidia-smi topo -m: {topo.outcome}: {topo.message}")
        write("topology.txt", text + f"\n\n# nvidia-smi topo -m: {topo.summary()}")

    # The node and gputui itself (a replay: the recorded node, nothing of this machine).
    if recorded_node is not None:
        dump_json("host.json", recorded_host(host, made_from, last, len(snapshots)))
    else:
        dump_json("host.json", live_host(host, last, len(snapshots), tool_path))
    rep.elapsed_s = time.monotonic() - start
    readme = readme_lines(host, recorded_node, made_from, rep.files, rep.notes)
    write("README.txt", "\n".join(readme))
    return rep
