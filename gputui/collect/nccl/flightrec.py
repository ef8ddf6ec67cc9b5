"""PyTorch's flight recorder, where the job turned it on: trigger, wait, analyze.

When the ranks' environments set `TORCH_NCCL_DEBUG_INFO_PIPE_FILE`, each rank makes a FIFO
`<value><rank>.pipe`; writing to it makes that rank dump its recent collectives to
`<prefix><rank>` (prefix `TORCH_FR_DUMP_TEMP_FILE`, older `TORCH_NCCL_DEBUG_INFO_TEMP_FILE`,
default /tmp/nccl_trace_rank_) while training goes on (6.4 s on the GPU image). The dumps are
pickles: gputui never unpickles them. It copies them into a private directory and runs
PyTorch's own analyzer (`torchfrtrace`) with the job's own interpreter, as the job's user
when gputui is root (the analyzer executes the job's Python environment), bounded, its
process group killed on timeout.

The job's user names the dump paths, so they are hostile input to root: a dump is opened
without following a link (O_NOFOLLOW, then fstat on the open file), must be a regular file
owned by the job's user (what that user could read anyway: a link or a hard link to a
root-only file is refused, never copied and handed to that user), and the analyzer runs
isolated (`python -I`: no PYTHONPATH, no user site, not the working directory) with a
fixed small environment, never the job's (a planted `fr_trace` module on the job's
PYTHONPATH read the copied secret in round four of the hostile sweep). What the analyzer
prints ("Not all ranks joining collective ...", "missing ranks: {1}") is parsed into
findings.

Every step is bounded and cancellable, and no step raises: problems are the `outcome` and
`error` of the result.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gputui.collect.nccl.fr_analyzer import parse_analyzer
from gputui.collect.subproc import run_bounded
from gputui.redact import redact_text

PIPE_ENV = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"
DUMP_ENVS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
DEFAULT_DUMP_PREFIX = "/tmp/nccl_trace_rank_"
BUFFER_ENVS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
ANALYZER = "torch.distributed.flight_recorder.fr_trace"
STAGED_PREFIX = "gputui_fr_rank_"  # the dumps' names in gputui's private directory
WAIT_S = 20.0  # for the dump files (6.4 s seen on the GPU image)
ANALYZER_TIMEOUT_S = 60.0
MAX_DUMP_BYTES = 256 << 20
MAX_OUTPUT_BYTES = 256 << 10
_POLL_S = 0.25


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


# ---------------------------------------------------------------- trigger and wait


def trigger(pipe: str) -> str:
    """Ask one rank to dump: 'sent', or why not. Never blocks: a FIFO nobody reads is ENXIO."""
    try:
        st = os.lstat(pipe)
    except FileNotFoundError:
        return "no_pipe"
    except OSError as e:
        return f"error: {pipe}: {e.strerror}"
    if not stat.S_ISFIFO(st.st_mode):
        return "not_fifo"  # never write into a regular file or through a link
    try:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as e:
        if e.errno == errno.ENXIO:
            return "no_reader"
        return f"error: {pipe}: {e.strerror}"
    try:
        os.write(fd, b"1\n")
    except BlockingIOError:
        pass  # the pipe is full of earlier requests: a dump is already asked for
    except OSError as e:
        return f"error: {pipe}: {e.strerror}"
    finally:
        os.close(fd)
    return "sent"


def wait_for_dumps(
    paths: Mapping[int, str], since: float, timeout: float, cancel: threading.Event
) -> dict[int, str]:
    """The dump files (rank -> path) written after `since` whose size stopped changing."""
    sizes: dict[int, int] = {}
    done: dict[int, str] = {}
    deadline = time.monotonic() + timeout
    while len(done) < len(paths) and time.monotonic() < deadline and not cancel.is_set():
        for rank, path in paths.items():
            if rank in done:
                continue
            try:
                st = os.lstat(path)  # a link is never waited for (nor read: open_owned)
            except OSError:
                continue
            if st.st_mtime < since - 1.0 or st.st_size == 0 or not stat.S_ISREG(st.st_mode):
                continue
            if sizes.get(rank) == st.st_size:
                done[rank] = path  # the same size twice in a row: the writer has finished
            sizes[rank] = st.st_size
        if len(done) < len(paths):
            cancel.wait(_POLL_S)
    return done


def other_dumps(prefix: str, since: float, have: set[int]) -> dict[int, str]:
    """Fresh dumps of ranks that are not local: on a shared file system, the other nodes'.

    gputui on the other nodes (or their watchdogs) dump into the same place; with them the
    analyzer sees every rank and names ranks on other nodes too. Only files written within
    a minute of this trigger count, so an old incident's dumps are never mixed in.
    """
    directory, base = os.path.split(prefix)
    found: dict[int, str] = {}
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return found
    for name in names[:100_000]:
        rest = name[len(base) :] if name.startswith(base) else ""
        if not rest.isdigit() or int(rest) in have:
            continue
        path = os.path.join(directory, name)
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_size and abs(st.st_mtime - since) <= 60:
                found[int(rest)] = path
        if len(found) >= 8192:
            break
    return found


def open_owned(path: str, uid: int | None) -> int:
    """A descriptor on `path`, a regular file owned by `uid` (the job's user), reached
    without following a link in its last component. OSError (saying why) otherwise; as
    root an unknown `uid` is refused too (root could read anything)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        if uid is None and os.geteuid() == 0:
            raise OSError(errno.EPERM, "the job's user is unknown")
        if uid is not None and st.st_uid != uid:
            raise OSError(errno.EPERM, f"owned by uid {st.st_uid}, not the job's user {uid}")
        if st.st_nlink > 1 and uid is not None and uid != os.geteuid():
            raise OSError(errno.EPERM, "has other hard links")
    except BaseException:
        os.close(fd)
        raise
    return fd


def stage(
    dumps: Mapping[int, str], uid: int | None, gid: int | None, refused: list[str] | None = None
) -> tuple[str, list[int]]:
    """Copy the dumps (each opened with open_owned) into a new private directory the
    analyzer's user can read; why a dump was refused goes into `refused`."""
    tmp = tempfile.mkdtemp(prefix="gputui-fr-")
    staged = []
    for rank, path in sorted(dumps.items()):
        dest = os.path.join(tmp, f"{STAGED_PREFIX}{rank}")
        try:
            src_fd = open_owned(path, uid)
        except OSError as e:
            if refused is not None:
                why = "is a symbolic link" if e.errno == errno.ELOOP else e.strerror or str(e)
                refused.append(f"rank {rank}'s dump {redact_text(path)[:200]}: {why}")
            continue
        try:
            with os.fdopen(src_fd, "rb") as src, open(dest, "xb") as out:
                copied = 0
                while chunk := src.read(1 << 20):
                    copied += len(chunk)
                    if copied > MAX_DUMP_BYTES:
                        raise OSError(errno.EFBIG, "dump larger than 256 MiB")
                    out.write(chunk)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(dest)
            continue
        staged.append(rank)
    if os.geteuid() == 0 and uid not in (None, 0):
        for name in [tmp, *(os.path.join(tmp, f) for f in os.listdir(tmp))]:
            os.chown(name, uid, gid if gid is not None else -1)  # type: ignore[arg-type]
    return tmp, staged


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
