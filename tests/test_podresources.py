"""Pod names from the kubelet's pod-resources API, over a real gRPC unix socket.

The server below speaks the kubelet's published protocol (`v1.PodResourcesLister/List` with
a ListPodResourcesResponse), its answer encoded field by field as the .proto defines it, so
what gputui decodes is the same bytes a kubelet sends. Then the ways it goes wrong: no socket,
a server that refuses, one that never answers within the deadline, and garbage.
"""

from __future__ import annotations

import threading
from concurrent import futures

import pytest

from gputui.collect.model import GpuSample, ProcessInfo
from gputui.collect.procs.owner import Owner
from gputui.collect.procs.podresources import (
    PodGpu,
    PodResources,
    WireError,
    decode_list,
    list_pod_gpus,
    name_pods,
)

grpc = pytest.importorskip("grpc")

UUID0 = "GPU-6b1f2a4e-0000-1111-2222-333344445555"
UUID1 = "GPU-9c2d3b5f-0000-1111-2222-333344445555"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def _device(resource: str, *ids: str) -> bytes:
    return _field(1, resource) + b"".join(_field(2, i) for i in ids)


def _container(name: str, *devices: bytes) -> bytes:
    cpu_ids = _varint(3 << 3 | 0) + _varint(7)  # repeated int64 cpu_ids (unpacked): skipped
    return _field(1, name) + b"".join(_field(2, d) for d in devices) + cpu_ids


def _pod(name: str, ns: str, *containers: bytes) -> bytes:
    return _field(1, name) + _field(2, ns) + b"".join(_field(3, c) for c in containers)


ANSWER = _field(
    1,
    _pod(
        "train-7f9c-worker-1",
        "ml",
        _container("trainer", _device("nvidia.com/gpu", UUID1)),
        _container("sidecar", _device("example.com/nic", "eth1")),
    ),
) + _field(1, _pod("notebook-0", "alice", _container("jupyter", _device("nvidia.com/gpu", UUID0))))


@pytest.fixture
def kubelet(tmp_path):
    """A gRPC server on a unix socket answering List as `behaviour` says."""
    servers = []

    def start(behaviour: str = "ok") -> str:
        path = tmp_path / f"kubelet-{behaviour}.sock"
        release = threading.Event()

        def handle(request: bytes, context) -> bytes:
            if behaviour == "refuse":
                context.abort(grpc.StatusCode.PERMISSION_DENIED, "no")
            if behaviour == "stall":
                release.wait(10)
            if behaviour == "garbage":
                return b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
            return ANSWER

        handler = grpc.method_handlers_generic_handler(
            "v1.PodResourcesLister",
            {
                "List": grpc.unary_unary_rpc_method_handler(
                    handle,
                    request_deserializer=lambda b: b,
                    response_serializer=lambda b: b,
                )
            },
        )
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((handler,))
        server.add_insecure_port(f"unix://{path}")
        server.start()
        servers.append((server, release))
        return str(path)

    yield start
    for server, release in servers:
        release.set()
        server.stop(0)


def test_each_containers_gpus_come_with_its_pod_and_namespace(kubelet):
    got = list_pod_gpus(kubelet("ok"))
    assert got == [
        PodGpu("train-7f9c-worker-1", "ml", "trainer", UUID1),
        PodGpu("notebook-0", "alice", "jupyter", UUID0),
    ]  # the sidecar's NIC is not a GPU


def test_a_rank_known_by_pod_uid_gets_its_pods_name_from_the_kubelet(kubelet):
    podres = PodResources(kubelet("ok"))
    gpus = (GpuSample(index=0, uuid=UUID0), GpuSample(index=1, uuid=UUID1))
    rank = ProcessInfo(pid=815, gpus=(1,), owner=Owner("pod", pod_uid="3f9c1d2e"))
    name_pods([rank], gpus, podres)  # starts the first read, never waits for it
    assert podres.wait_idle(10) and podres.error is None
    (named,) = name_pods([rank], gpus, podres)
    assert named.owner.pod_name == "train-7f9c-worker-1"
    assert named.owner.namespace == "ml" and named.owner.container == "trainer"
    assert named.owner.short() == "pod ml/train-7f9c-worker-1"


@pytest.mark.parametrize(
    "behaviour, said",
    [("refuse", "refused: PERMISSION_DENIED"), ("stall", "DEADLINE_EXCEEDED"), ("garbage", "")],
)
def test_a_kubelet_that_refuses_stalls_or_answers_garbage_is_one_line(kubelet, behaviour, said):
    podres = PodResources(kubelet(behaviour))
    rank = ProcessInfo(pid=815, gpus=(0,), owner=Owner("pod", pod_uid="3f9c1d2e"))
    gpus = (GpuSample(index=0, uuid=UUID0),)
    name_pods([rank], gpus, podres)
    assert podres.wait_idle(10)
    assert podres.error is not None and said in podres.error and "\n" not in podres.error
    (same,) = name_pods([rank], gpus, podres)
    assert same.owner.pod_name is None  # the rest works on


def test_no_socket_is_said_once_without_grpc_being_needed(tmp_path):
    podres = PodResources(str(tmp_path / "absent.sock"))
    rank = ProcessInfo(pid=815, gpus=(0,), owner=Owner("pod", pod_uid="3f9c1d2e"))
    name_pods([rank], (GpuSample(index=0, uuid=UUID0),), podres)
    assert podres.wait_idle(10)
    assert podres.error == f"no kubelet pod-resources socket at {tmp_path / 'absent.sock'}"


@pytest.mark.parametrize("raw", [b"\x0a\x05ab", b"\x0f", b"\x0a\x80", b"\x08" + b"\xff" * 20])
def test_truncated_or_odd_wire_data_is_a_wire_error_not_a_crash(raw):
    with pytest.raises(WireError):
        decode_list(raw)


def test_processes_outside_pods_are_left_alone():
    podres = PodResources("/nonexistent")
    p = ProcessInfo(pid=1, gpus=(0,))
    assert name_pods([p], (GpuSample(index=0, uuid=UUID0),), podres) == [p]
