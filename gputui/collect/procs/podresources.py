"""Which pod holds which GPU: the kubelet's pod-resources API, as dcgm-exporter reads it.

A process's cgroup names its pod by UID (gputui.collect.procs.owner); a person wants the pod's name
and namespace. The kubelet serves them, with the GPUs each container was given, on a unix
socket (`/var/lib/kubelet/pod-resources/kubelet.sock`, gRPC service
`v1.PodResourcesLister`). Only `List` is called, with an empty request; the answer is decoded
here with a few lines of protobuf wire format rather than generated stubs, so the only
dependency is grpcio, and only where the socket exists (the `kube` extra).

Bounded and quiet: a missing socket, no grpcio, a kubelet that refuses, stalls (1 s deadline)
or answers garbage gives `error` (one line) and an empty map; the rest of gputui works on.
Refreshed in a daemon thread at most every `REFRESH_S`, never on the sampling path.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
METHOD = "/v1.PodResourcesLister/List"
DEADLINE_S = 1.0
REFRESH_S = 30.0
MAX_ANSWER = 16 << 20
GPU_RESOURCES = ("nvidia.com/gpu",)  # also nvidia.com/mig-* (prefix match below)


@dataclass(frozen=True)
class PodGpu:
    """A container given a GPU by the device plugin."""

    pod: str
    namespace: str
    container: str
    device_id: str  # the GPU's UUID (or a MIG device's), as the device plugin names it


class WireError(ValueError):
    """The bytes are not the protobuf message expected."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise WireError("truncated varint")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def fields(buf: bytes) -> list[tuple[int, int, bytes | int]]:
    """(field number, wire type, value) of one message: bytes for length-delimited fields,
    ints otherwise. Unknown fields are kept, so a newer kubelet's answer still decodes."""
    out: list[tuple[int, int, bytes | int]] = []
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
            out.append((num, wt, v))
        elif wt == 2:
            n, i = _varint(buf, i)
            if i + n > len(buf):
                raise WireError("truncated field")
            out.append((num, wt, buf[i : i + n]))
            i += n
        elif wt in (1, 5):
            size = 8 if wt == 1 else 4
            if i + size > len(buf):
                raise WireError("truncated fixed field")
            out.append((num, wt, int.from_bytes(buf[i : i + size], "little")))
            i += size
        else:
            raise WireError(f"wire type {wt}")
    return out


def _text(v: bytes | int) -> str:
    if not isinstance(v, bytes):
        raise WireError("expected a string")
    return v.decode("utf-8", "replace")[:253]


def _is_gpu(resource: str) -> bool:
    return resource in GPU_RESOURCES or resource.startswith("nvidia.com/mig-")


def decode_list(answer: bytes) -> list[PodGpu]:
    """ListPodResourcesResponse -> one PodGpu per GPU device of every container."""
    out: list[PodGpu] = []
    for num, wt, pod in fields(answer):
        if num != 1 or wt != 2:
            continue
        name = ns = ""
        containers: list[bytes] = []
        for n, w, v in fields(pod):  # type: ignore[arg-type]
            if n == 1 and w == 2:
                name = _text(v)
            elif n == 2 and w == 2:
                ns = _text(v)
            elif n == 3 and w == 2 and isinstance(v, bytes):
                containers.append(v)
        for c in containers:
            cname, devices = "", []
            for n, w, v in fields(c):
                if n == 1 and w == 2:
                    cname = _text(v)
                elif n == 2 and w == 2 and isinstance(v, bytes):
                    devices.append(v)
            for d in devices:
                resource, ids = "", []
                for n, w, v in fields(d):
                    if n == 1 and w == 2:
                        resource = _text(v)
                    elif n == 2 and w == 2:
                        ids.append(_text(v))
                if _is_gpu(resource):
                    out += [PodGpu(name, ns, cname, i) for i in ids]
    return out


def list_pod_gpus(socket_path: str = SOCKET, deadline: float = DEADLINE_S) -> list[PodGpu]:
    """Ask the kubelet once; raises OSError/ValueError/ImportError with a one-line message."""
    if not os.path.exists(socket_path):
        raise OSError(f"no kubelet pod-resources socket at {socket_path}")
    import grpc  # the `kube` extra; ImportError says so to the caller

    with grpc.insecure_channel(f"unix://{socket_path}") as channel:
        call = channel.unary_unary(
            METHOD,
            request_serializer=lambda _req: b"",
            response_deserializer=lambda raw: raw,
        )
        try:
            raw = call(None, timeout=deadline)
        except grpc.RpcError as e:
            code = e.code().name if hasattr(e, "code") and e.code() else "error"
            raise OSError(f"the kubelet's pod-resources API refused: {code}") from None
    if not isinstance(raw, bytes) or len(raw) > MAX_ANSWER:
        raise ValueError("the kubelet's pod-resources answer is too large")
    return decode_list(raw)


class PodResources:
    """The latest pod-resources answer by GPU UUID, refreshed in a daemon thread."""

    def __init__(self, socket_path: str = SOCKET, refresh: float = REFRESH_S) -> None:
        self.socket_path = socket_path
        self.refresh = refresh
        self.error: str | None = None
        self._by_uuid: dict[str, PodGpu] = {}
        self._lock = threading.Lock()
        self._next = 0.0
        self._busy = False
        self._idle = threading.Event()
        self._idle.set()

    def by_uuid(self) -> dict[str, PodGpu]:
        """The map as last read; starts a refresh when one is due (never waits for it)."""
        now = time.monotonic()
        with self._lock:
            due = now >= self._next and not self._busy
            if due:
                self._busy, self._next = True, now + self.refresh
                self._idle.clear()
            current = dict(self._by_uuid)
        if due:
            threading.Thread(target=self._refresh, name="gputui-podres", daemon=True).start()
        return current

    def _refresh(self) -> None:
        try:
            found = {p.device_id: p for p in list_pod_gpus(self.socket_path)}
            error = None
        except ImportError:
            found, error = {}, "pod names need grpcio (pip install 'gputui[kube]')"
        except (OSError, ValueError) as e:
            found, error = {}, str(e)[:200]
        with self._lock:
            self._by_uuid, self.error, self._busy = found, error, False
        self._idle.set()

    def wait_idle(self, timeout: float) -> bool:
        """For one-shot commands and tests: wait until no refresh runs."""
        return self._idle.wait(timeout)


def name_pods(processes: list, gpus: tuple, podres: PodResources) -> list:
    """Processes whose owner is a pod known by UID only, given the pod's name, namespace and
    container from the kubelet (matched through the GPU the process runs on)."""
    from dataclasses import replace

    if not any(p.owner is not None and p.owner.kind == "pod" for p in processes):
        return processes
    by_uuid = podres.by_uuid()
    if not by_uuid:
        return processes
    uuid_of = {g.index: g.uuid for g in gpus}
    out = []
    for p in processes:
        o = p.owner
        if o is not None and o.kind == "pod":
            hit = next((by_uuid[u] for i in p.gpus if (u := uuid_of.get(i)) in by_uuid), None)
            if hit is not None:
                o = replace(o, pod_name=hit.pod, namespace=hit.namespace, container=hit.container)
                p = replace(p, owner=o)
        out.append(p)
    return out
