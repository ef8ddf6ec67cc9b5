"""What the incident bundle keeps of each process: its command line and environment (secrets
redacted), its user, state and directory, and the CUDA/NCCL/torch libraries it loaded.

A process of a recording was not read here: only what the recording holds is kept. A live
one is read only where attaching to it would be allowed (the same preflight as py-spy's), so
the bundle never reads another user's process that the stacks could not.
"""

from __future__ import annotations

from typing import Any

import psutil

from gputui.collect.model import ProcessInfo
from gputui.collect.procs.libraries import process_libraries
from gputui.collect.procs.reader import exe_name
from gputui.redact import redact_argv, redact_env
from gputui.tools.attach import ptrace
from gputui.tools.attach.ptrace import Target


def process_record(p: ProcessInfo | int) -> dict[str, Any]:
    """Command line, environment (redacted) and libraries of one process, for the bundle."""
    info = p if isinstance(p, ProcessInfo) else None
    pid = p.pid if isinstance(p, ProcessInfo) else int(p)
    rec: dict[str, Any] = {"pid": pid}
    if info is not None:
        rec.update(create_time=info.create_time, user=info.user, gpus=list(info.gpus))
        rec["cmdline"] = redact_argv(info.cmdline, info.name)
        if info.rank is not None:
            rec["rank"] = info.rank.rank
    if info is not None and not info.live:
        rec["note"] = "from a recording: environment and libraries are not available"
        return rec
    problem = ptrace.preflight(Target.of(p))
    if problem is not None:
        rec["note"] = problem[1]
        return rec
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            rec["create_time"] = proc.create_time()
            # the tool known by its comm or executable too (`exec -a python redis-cli -a X`)
            rec["cmdline"] = redact_argv(proc.cmdline(), (proc.name(), *exe_name(proc)))
            rec["user"] = proc.username()
            rec["state"] = proc.status()
            rec["cwd"] = proc.cwd()
    except psutil.Error as e:
        rec.setdefault("note", f"process details not readable ({type(e).__name__})")
    try:
        env = psutil.Process(pid).environ()
        rec["environ"] = redact_env(env)
        if "rank" not in rec and env.get("RANK", "").isdigit():
            rec["rank"] = int(env["RANK"])
    except psutil.Error as e:
        rec["environ_error"] = f"not readable ({type(e).__name__}): run as the job's user or root"
    rec["libraries"] = process_libraries(pid)
    return rec
