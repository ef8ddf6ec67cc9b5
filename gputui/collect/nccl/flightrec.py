"""PyTorch's flight recorder, where the job turned it on: trigger, wait, analyze.

When the ranks' environments set `TORCH_NCCL_DEBUG_INFO_PIPE_FILE`, each rank makes a FIFO
`<value><rank>.pipe`; writing to it makes that rank dump its recent collectives to
`<prefix><rank>` (prefix `TORCH_FR_DUMP_TEMP_FILE`, older `TORCH_NCCL_DEBUG_INFO_TEMP_FILE`,
default /tmp/nccl_trace_rank_) while training goes on (6.4 s on the GPU image). The dumps are
pickles: gputui never unpickles them. It copies them into a private directory (asking,
waiting and copying: gputui.collect.nccl.fr_dumps) and runs PyTorch's own analyzer
(`torchfrtrace`) with the job's own interpreter, as the job's user when gputui is root (the
analyzer executes the job's Python environment), bounded, its process group killed on timeout.

The job's user names the dump paths, so they are hostile input to root (fr_dumps opens each
without following a link, as the job's user's own regular file), and the analyzer runs
isolated (`python -I`: no PYTHONPATH, no user site, not the working directory) with a
fixed small environment, never the job's (a planted `fr_trace` module on the job's
PYTHONPATH read the copied secret in round four of the hostile sweep). What the analyzer
prints ("Not all ranks joining collective ...", "missing ranks: {1}") is parsed into
findings (gputui.collect.nccl.fr_analyzer).

Every step is bounded and cancellable, and no step raises: problems are the `outcome` and
`error` of the result.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gputui.collect.nccl.fr_analyzer import parse_analyzer
from gputui.collect.nccl.fr_dumps import STAGED_PREFIX, other_dumps, stage, trigger, wait_for_dumps
from gputui.collect.subproc import run_bounded
from gputui.redact import redact_text

PIPE_ENV = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"
DUMP_ENVS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
DEFAULT_DUMP_PREFIX = "/tmp/nccl_trace_rank_"
BUFFER_ENVS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
ANALYZER = "torch.distributed.flight_recorder.fr_trace"
WAIT_S = 20.0  # for the dump files (6.4 s seen on the GPU image)
ANALYZER_TIMEOUT_S = 60.0
MAX_OUTPUT_BYTES = 256 << 10


@dataclass(frozen=True)
class FrRank:
    """A local rank, as much as the flight recorder needs of it."""

    pid: int
    rank: int
    env: Mapping[str, str]  # its environment (only the variables read below are used)
    uid: int | None = None
    gid: int | None = None
    interpreter: str | None = None  # the job's python, see job_interpreter()


def settings(env: Mapping[str, str]) -> dict[str, Any]:
    """The flight-recorder variables of one rank's environment."""
    dump = next((env[k] for k in DUMP_ENVS if env.get(k)), DEFAULT_DUMP_PREFIX)
    size = next((env[k] for k in BUFFER_ENVS if env.get(k)), None)
    return {
        "pipe": env.get(PIPE_ENV) or None,
        "dump_prefix": dump,
        "buffer": int(size) if size and size.strip().isdigit() else None,
    }


def job_interpreter(pid: int, cmdline: list[str] | tuple[str, ...], env: Mapping[str, str]) -> str:
    """The path that starts the job's own Python, with its virtual environment.

    /proc/PID/exe resolves a venv's `bin/python` symlink to the base interpreter, which
    would not see the venv's torch. Python finds its venv from the path it was started by
    (argv[0], or its PATH lookup), so that path is used when it leads to the same binary.

    Args:
        pid: a rank's pid.
        cmdline: its command line.
        env: its environment (for PATH).

    Returns:
        The path of the Python that started the job (its venv's `bin/python` where that is the same
        binary).
    """
    proc_exe = f"/proc/{pid}/exe"
    try:
        real = os.path.realpath(proc_exe)
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return proc_exe
    argv0 = cmdline[0] if cmdline else ""
    if "/" in argv0:
        candidates = [os.path.join(cwd, argv0)]
    elif argv0:
        dirs = (env.get("PATH") or "/usr/local/bin:/usr/bin:/bin").split(":")
        candidates = [os.path.join(d or cwd, argv0) for d in dirs]
    else:
        candidates = []
    for c in candidates:
        with contextlib.suppress(OSError):
            if os.path.isfile(c) and os.path.realpath(c) == real:
                return c
    return proc_exe


# ---------------------------------------------------------------- the analyzer


def analyzer_argv(interpreter: str, directory: str, complete: bool) -> list[str]:
    # -I: isolated: no PYTHON* variables, no user site, no working directory on sys.path; a
    # venv's interpreter still finds the venv's torch (pyvenv.cfg beside it)
    argv = [interpreter, "-I", "-m", ANALYZER, "--prefix", STAGED_PREFIX]
    if not complete:
        argv.append("--allow-incomplete-ranks")  # ranks of other nodes have no dump here
    return [*argv, directory]


def run_analyzer(
    argv: list[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    uid: int | None,
    gid: int | None,
    timeout: float,
    cancel: threading.Event,
) -> tuple[str, int | None, str, float]:
    """(outcome, exit status, output, seconds): outcome done | timeout | cancelled | failed."""
    outcome, rc, out, err, secs = run_bounded(
        argv,
        timeout=timeout,
        cancel=cancel,
        env=env,
        cwd=cwd,
        merge_stderr=True,
        uid=uid,
        gid=gid,
        max_stdout=MAX_OUTPUT_BYTES,
    )
    return outcome, rc, out or err, secs


# ---------------------------------------------------------------- all of it


def analyzer_env(home: str) -> dict[str, str]:
    """A small fixed environment for the analyzer, none of the job's: its PYTHONPATH,
    PYTHONHOME, LD_PRELOAD or LD_LIBRARY_PATH would choose the code the analyzer runs."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def flight_record(
    ranks: list[FrRank],
    cancel: threading.Event,
    *,
    world_size: int | None = None,
    wait_s: float = WAIT_S,
    analyzer_timeout_s: float = ANALYZER_TIMEOUT_S,
) -> dict[str, Any]:
    """Trigger every local rank's dump, wait, analyze: the "flightrec" part of the record.

    Args:
        ranks: the job's local ranks (pid, rank, where each dumps).
        cancel: set to stop waiting and analyzing.
        world_size: the job's world size, when known: with every rank's dump in, the analyzer
            is told the set is complete.
        wait_s: how long to wait for the ranks' dumps to appear.
        analyzer_timeout_s: the bound on PyTorch's flight-recorder analyzer.

    Returns:
        The record's `flightrec` part: what was dumped, the analyzer's answer or why there is none.
    """
    if not ranks:
        return {"outcome": "off", "error": "no local ranks"}
    conf = settings(ranks[0].env)
    res: dict[str, Any] = {
        "outcome": "off",
        "pipe": conf["pipe"],
        "dump_prefix": conf["dump_prefix"],
    }
    if not conf["pipe"]:
        res["error"] = f"{PIPE_ENV} is not set in the job's environment"
        return res
    t0 = time.time()
    sent: dict[int, str] = {}
    triggers = {}
    for r in ranks:
        c = settings(r.env)
        outcome = trigger(f"{c['pipe']}{r.rank}.pipe")
        triggers[str(r.rank)] = outcome
        if outcome == "sent":
            sent[r.rank] = f"{c['dump_prefix']}{r.rank}"
    res["triggers"] = triggers
    if not sent:
        res["outcome"] = "no_reader"
        res["error"] = (
            f"no rank read its dump pipe ({conf['pipe']}<rank>.pipe: "
            + ", ".join(sorted(set(triggers.values())))
            + "); the flight recorder's pipe is watched by ProcessGroupNCCL's monitor thread"
        )
        return res
    dumps = wait_for_dumps(sent, t0, wait_s, cancel)
    if dumps:
        dumps.update(other_dumps(conf["dump_prefix"], t0, set(dumps)))
    res["dumps"] = sorted(dumps)
    res["waited_s"] = round(time.time() - t0, 2)
    if cancel.is_set():
        return {**res, "outcome": "cancelled", "error": "cancelled"}
    if not dumps:
        return {
            **res,
            "outcome": "no_dumps",
            "error": f"no dump file appeared within {wait_s:g} s ({conf['dump_prefix']}<rank>)",
        }
    lead = next(r for r in ranks if r.rank in dumps)
    if os.geteuid() != 0 and lead.uid is not None and lead.uid != os.geteuid():
        return {
            **res,
            "outcome": "failed",
            "error": f"the analyzer runs the job's own Python, and the job's user (uid "
            f"{lead.uid}) is not gputui's: run gputui as that user or as root",
        }
    refused: list[str] = []
    directory, staged = stage(dumps, lead.uid, lead.gid, refused)
    if refused:
        res["refused"] = refused[:8]
    if not staged:
        shutil.rmtree(directory, ignore_errors=True)
        return {
            **res,
            "outcome": "failed",
            "error": "no dump could be read" + (f": {refused[0]}" if refused else ""),
        }
    try:
        complete = world_size is not None and len(staged) >= world_size
        argv = analyzer_argv(lead.interpreter or f"/proc/{lead.pid}/exe", directory, complete)
        outcome, rc, text, secs = run_analyzer(
            argv,
            cwd=directory,
            env=analyzer_env(directory),
            uid=lead.uid,
            gid=lead.gid,
            timeout=analyzer_timeout_s,
            cancel=cancel,
        )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    findings, failure = parse_analyzer(text)
    res.update(
        analyzer={"argv": [*argv[:-1], "<dumps>"], "rc": rc, "seconds": secs}, findings=findings
    )
    if outcome != "done":
        res.update(
            outcome=outcome,
            error=f"the analyzer ran past {analyzer_timeout_s:g} s"
            if outcome == "timeout"
            else outcome,
        )
    elif failure is not None or rc:
        tail = redact_text(text.strip()[-600:])
        res.update(
            outcome="failed",
            error=f"the analyzer failed: {failure or f'exit {rc}'}",
            output_tail=tail,
        )
    else:
        res["outcome"] = "done"
    return res
