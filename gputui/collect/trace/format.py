"""The recording format: JSON lines, one object per GPU per sample (gzip if the name ends .gz).

The floor is the calibration format of our H200 runs (t, gpu, util, mem_util,
power_w, sm_mhz, mem_used_mb, temp, pstate, events, pids, ...; phase optional). gputui adds
fields of its own (name, uuid, power_limit_w, mem_total_mb, proc_mem, procs) and reads files
that lack them. Only the rank-related environment variables are ever written, never a whole
environment, so a recording holds no secrets.

Lines with a `"type"` key are typed records, not GPU samples: `TraceWriter` writes a `meta`
record first (host, gputui version, interval) and others through `write_record`. Reading is
in trace_read (untrusted input: bounds and rules in trace_schema); `read_trace` is re-exported
here for the callers that have always imported it from this module.

The writer keeps what it writes inside the reader's bounds (long command lines and strings
are shortened, lists capped, non-finite numbers written as null), so every file gputui
writes reads back.
"""

from __future__ import annotations

import errno
import gzip
import os
import socket
import stat
import time
from pathlib import Path
from typing import Any

from gputui import __version__
from gputui.collect.model import ProcessInfo, Snapshot
from gputui.collect.trace import schema
from gputui.collect.trace.read import read_trace, shown
from gputui.errors import GputuiError
from gputui.jsonout import dumps

__all__ = [
    "TraceWriter",
    "open_output",
    "process_to_dict",
    "read_trace",
    "snapshot_to_lines",
]

_GPU_FIELDS = {key: attr for key, attr, *_ in schema.GPU_READINGS}  # file key -> attribute


def _clip(s: str | None, limit: int = schema.MAX_STR_CHARS) -> str | None:
    return s if s is None or len(s) <= limit else s[: limit - 1] + "…"


def clip_cmdline(args: tuple[str, ...] | list[str]) -> list[str]:
    """A command line cut to MAX_CMDLINE_ARGS arguments and MAX_CMDLINE_CHARS characters
    (the last kept argument is shortened, ending in '…'), so its line stays readable."""
    out: list[str] = []
    room = schema.MAX_CMDLINE_CHARS
    for a in list(args)[: schema.MAX_CMDLINE_ARGS]:
        if len(a) > room:
            if room > 1:
                out.append(a[: room - 1] + "…")
            break
        out.append(a)
        room -= len(a)
    return out


def process_to_dict(p: ProcessInfo) -> dict[str, Any]:
    r = p.rank
    env: dict[str, str] = {}
    if r is not None:
        pairs = {
            "RANK": r.rank,
            "LOCAL_RANK": r.local_rank,
            "WORLD_SIZE": r.world_size,
            "LOCAL_WORLD_SIZE": r.local_world_size,
            "TORCHELASTIC_RUN_ID": r.run_id,
            "SLURM_JOB_ID": r.slurm_job_id,
        }
        env = {k: _clip(str(v)) for k, v in pairs.items() if v is not None}  # type: ignore[misc]
        if r.master:
            addr, _, port = r.master.rpartition(":")
            env["MASTER_ADDR"], env["MASTER_PORT"] = _clip(addr), _clip(port)  # type: ignore[assignment]
    d: dict[str, Any] = {
        "pid": p.pid,
        "create_time": p.create_time,
        "user": _clip(p.user),
        "name": _clip(p.name),
        "cmdline": clip_cmdline(p.cmdline),
        "state": _clip(p.state),
        "cpu": p.cpu_percent,
        "rss_mb": p.rss_mb,
        "ppid": p.ppid,
        "parent_cmd": _clip(p.parent_cmd, schema.MAX_CMDLINE_CHARS),
        "gpu_mem_mb": p.gpu_mem_mb,
        "env": env,
    }
    if p.env_error:
        d["env_error"] = _clip(p.env_error)
    if p.owner is not None:
        d["owner"] = p.owner.to_json()
    if p.nvml_pid is not None:
        d["nvml_pid"] = p.nvml_pid
    return d


def snapshot_to_lines(snap: Snapshot) -> list[dict[str, Any]]:
    """One dict per GPU; each carries the processes that run on that GPU."""
    cap = schema.MAX_PROCS_PER_GPU
    lines = []
    for g in snap.gpus:
        d: dict[str, Any] = {"t": round(snap.t, 3), "gpu": g.index}
        if snap.phase:
            d["phase"] = _clip(snap.phase)
        for key, attr in _GPU_FIELDS.items():
            d[key] = getattr(g, attr)
        d["pids"] = list(g.pids)[:cap]
        d["name"], d["uuid"] = _clip(g.name), _clip(g.uuid)
        d["proc_mem"] = [[pid, mb] for pid, mb in g.proc_mem_mb][:cap]
        d["procs"] = [process_to_dict(p) for p in snap.processes if g.index in p.gpus][:cap]
        lines.append(d)
    return lines


def nogpu_record(snap: Snapshot) -> dict[str, Any]:
    """A sample of a machine without GPUs as a typed record (it has no GPU line to be):
    why there are none and the host processes shown, so a bundle written there replays to
    the no-GPU verdict (gputui.collect.trace.read reads it back as a sample). At most
    MAX_PROCS_PER_GPU processes, those of a job (rank variables) first: on a busy host they
    are the ones a bundle is for."""
    cap = schema.MAX_PROCS_PER_GPU
    kept = sorted(snap.processes, key=lambda p: p.rank is None)[:cap]  # stable: in order
    return {
        "type": "nogpu",
        "t": round(snap.t, 3),
        "error": _clip(snap.gpu_error),
        "procs": [process_to_dict(p) for p in kept],
    }


# ---------------------------------------------------------------- opening a file to write


def open_output(path: str | Path, *, exclusive: bool = False) -> int:
    """A descriptor to write a recording to: a regular file (created, or emptied) or a
    character device (a terminal, /dev/null, /dev/full). GputuiError otherwise.

    Never follows a symbolic link, dangling or not (O_NOFOLLOW: a link planted where the
    user asked for a file cannot redirect the write); with `exclusive`, never replaces an
    existing file (O_EXCL: no race between "does it exist?" and the open). O_NONBLOCK makes
    the open of a FIFO return at once; fstat on the open descriptor decides, and a regular
    file is emptied only after that check, so nothing is truncated that is then refused.
    """
    name = shown(path)
    if str(path) == "":
        raise GputuiError("no output file named (empty file name)")
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    if exclusive:
        flags |= os.O_EXCL
    try:
        fd = os.open(path, flags, 0o666)
    except ValueError:  # a NUL byte in the name
        raise GputuiError(f"{name}: not a valid file name") from None
    except OSError as e:
        why = {
            errno.ELOOP: "is a symbolic link; gputui does not write through links (give the "
            "real path)",
            errno.EEXIST: "exists; choose another name or pass --force",
            errno.EISDIR: "is a directory",
            errno.ENXIO: "is a FIFO or a socket, not a file",
            errno.ENOENT: "no such directory",
        }.get(e.errno or 0, f"cannot write ({e.strerror or e})")
        raise GputuiError(f"{name}: {why}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            os.ftruncate(fd, 0)
        elif not stat.S_ISCHR(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
            raise GputuiError(f"{name}: is {kind}; gputui writes recordings to regular files")
        os.set_blocking(fd, True)
        return fd
    except OSError as e:
        os.close(fd)
        raise GputuiError(f"{name}: cannot write ({e.strerror or e})") from None
    except BaseException:
        os.close(fd)
        raise


class _Out:
    """The file under a TraceWriter: every write whole or an OSError, and a way back.

    A short write (the disk filled up mid-line) is retried until it fails, and then the
    file is cut back to the end of the last sample that was flushed whole (`rewind`), so a
    full disk leaves complete samples and nothing partial: a plain file reads as its
    complete lines, a gzip file as a stream cut after its last sync flush.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pos = 0  # bytes written so far
        self.good = 0  # end of the last sample flushed whole

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            self.pos += n
            view = view[n:]
        return len(data)

    def flush(self) -> None:
        pass  # unbuffered: os.write has handed every byte to the kernel

    def rewind(self) -> None:
        try:
            os.ftruncate(self.fd, self.good)  # a regular file; a device has nothing to cut
        except OSError:
            pass

    def close(self) -> None:
        os.close(self.fd)


class TraceWriter:
    """Appends snapshots to a trace file, flushing each sample so a killed recorder loses
    at most the sample being written.

    The first line is the `meta` record (`host`, `gputui` version, `interval`). Every write
    error (a full disk, a device that refuses) is a GputuiError naming the file; the file is
    cut back to its last complete sample, which stays readable.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        host: str | None = None,
        interval: float | None = None,
        exclusive: bool = False,
    ) -> None:
        self.path = path
        self.samples = 0
        self.records = 0  # typed records written after the meta line (e.g. stack dumps)
        self._out = _Out(open_output(path, exclusive=exclusive))
        self._gz: gzip.GzipFile | None = None
        self._closed = False
        if Path(path).suffix == ".gz":
            self._gz = gzip.GzipFile(filename="", fileobj=self._out, mode="wb")  # type: ignore[arg-type]
        meta = {
            "type": "meta",
            "t": round(time.time(), 3),
            "host": _clip(host or socket.gethostname(), 255),
            "gputui": __version__,
            "interval": interval,
        }
        self.write_record(meta)

    def _put(self, data: bytes) -> None:
        if self._closed:
            raise GputuiError(f"cannot write {shown(self.path)}: already closed")
        try:
            if self._gz is not None:
                self._gz.write(data)
                self._gz.flush()  # a sync flush: everything so far decompresses
            else:
                self._out.write(data)
        except OSError as e:
            self._out.rewind()
            self.abandon()
            raise GputuiError(f"cannot write {shown(self.path)}: {e.strerror or e}") from None
        self._out.good = self._out.pos

    def write(self, snap: Snapshot) -> None:
        data = b"".join(
            dumps(d, separators=(",", ":")).encode() + b"\n" for d in snapshot_to_lines(snap)
        )
        self._put(data)
        self.samples += 1

    def write_record(self, d: dict[str, Any]) -> None:
        """Write a typed record (`{"type": ..., "t": ..., ...}`), flushed at once.

        ValueError when its envelope is one the reader would refuse (type not a short
        lower-case word, `t` not a plausible time) or its line would exceed MAX_LINE_BYTES:
        those are mistakes of the caller, not of the disk.
        """
        kind, t = d.get("type"), d.get("t")
        if not isinstance(kind, str) or not schema.RECORD_TYPE.fullmatch(kind):
            raise ValueError(f"record type must match {schema.RECORD_TYPE.pattern}: {kind!r}")
        if not schema.is_number(t) or schema.in_range(t, 0, schema.T_MAX) is not None:
            raise ValueError(f"record t must be a Unix time: {t!r}")
        data = dumps(d, separators=(",", ":")).encode() + b"\n"
        if len(data) > schema.MAX_LINE_BYTES:
            raise ValueError(f"record of {len(data)} bytes exceeds {schema.MAX_LINE_BYTES}")
        self._put(data)
        if kind != "meta":
            self.records += 1

    def abandon(self) -> None:
        """Release the file without writing another byte (after a write error): a gzip file
        keeps no trailer, which its reader treats as a recording cut short."""
        if not self._closed:
            self._closed = True
            try:
                self._out.close()
            except OSError:
                pass

    def close(self) -> None:
        """Finish the file (the gzip trailer); GputuiError if the disk refuses it."""
        if self._closed:
            return
        if self._gz is not None:
            try:
                self._gz.close()
            except OSError as e:
                self._out.rewind()
                self.abandon()
                raise GputuiError(f"cannot write {shown(self.path)}: {e.strerror or e}") from None
        self._closed = True
        self._out.close()
