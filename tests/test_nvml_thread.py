"""The NVML thread: calls with a deadline, and a library that stays hung once a call overstays.

Plain Python callables stand in for NVML calls here (a call that blocks waits on an Event
the test holds), so the rules are checked without a driver: the stand-in library tests
(test_nvml_standin.py) check the same through real C calls. Also: how gputui tells a node
with no driver from one whose driver is there (driver.py), on directories laid out like /.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from gputui.collect.nvml.driver import driver_evidence
from gputui.collect.nvml.thread import NvmlHung, NvmlThread


@pytest.fixture
def gate() -> threading.Event:
    """Set at the end of each test, so a 'hung' callable ends and its thread with it."""
    ev = threading.Event()
    yield ev
    ev.set()


def test_a_call_returns_its_result_and_raises_its_error():
    t = NvmlThread()
    assert t.run(lambda a, b: a + b, 2, 3, timeout=5, what="add") == 5
    with pytest.raises(ValueError, match="bad"):
        t.run(lambda: (_ for _ in ()).throw(ValueError("bad")), timeout=5, what="raise")
    assert not t.stuck()


def test_a_call_that_overstays_raises_hung_naming_the_call(gate):
    t = NvmlThread()

    def read() -> None:
        t.current = "nvmlDeviceGetUtilizationRates on GPU 0"
        gate.wait()

    started = time.monotonic()
    with pytest.raises(NvmlHung) as e:
        t.run(read, timeout=0.2, what="reading GPUs")
    assert time.monotonic() - started < 2.0
    assert str(e.value).startswith(
        "NVML did not answer within 0.2 s (nvmlDeviceGetUtilizationRates on GPU 0)"
    )
    assert t.stuck()


def test_once_hung_later_calls_fail_at_once_and_never_run(gate):
    t = NvmlThread()
    with pytest.raises(NvmlHung):
        t.run(gate.wait, timeout=0.1, what="nvmlInit")
    ran = threading.Event()
    started = time.monotonic()
    with pytest.raises(NvmlHung, match=r"\(nvmlInit\)"):
        t.run(ran.set, timeout=30, what="nvmlShutdown")
    assert time.monotonic() - started < 1.0
    gate.set()  # the stuck call returns late: its answer is dropped, the library stays hung
    with pytest.raises(NvmlHung):
        t.run(ran.set, timeout=30, what="nvmlShutdown")
    assert not ran.is_set()


def test_calls_queued_behind_a_hung_one_are_failed_not_left_waiting(gate):
    t = NvmlThread()
    inside = threading.Event()
    outcome: list[BaseException] = []

    def stuck_call() -> None:
        inside.set()
        gate.wait()

    def first() -> None:
        try:
            t.run(stuck_call, timeout=0.3, what="a")
        except NvmlHung as e:
            outcome.append(e)

    th = threading.Thread(target=first)
    th.start()
    assert inside.wait(5)  # the first call is inside "NVML" now
    ran = threading.Event()
    with pytest.raises(NvmlHung):
        t.run(ran.set, timeout=30, what="b")  # queued; failed when the first one overstays
    th.join(5)
    assert not ran.is_set() and len(outcome) == 1


def test_a_late_answer_after_the_deadline_is_not_taken_as_an_answer(gate):
    t = NvmlThread()
    with pytest.raises(NvmlHung):
        t.run(lambda: gate.wait() and "late", timeout=0.1, what="x")
    gate.set()
    assert t.stuck()  # hung for good, even though the call came back


# ---------------------------------------------------------------- driver present?


def layout(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_node_without_nvidia_anything_has_no_driver_evidence(tmp_path):
    layout(tmp_path, {"sys/bus/pci/devices/0000:00:02.0/vendor": "0x8086\n"})
    layout(tmp_path, {"sys/bus/pci/devices/0000:00:02.0/class": "0x030000\n"})
    assert driver_evidence(tmp_path) is None


def test_the_loaded_kernel_module_is_evidence(tmp_path):
    layout(tmp_path, {"proc/driver/nvidia/version": "NVRM version: 580.159.04\n"})
    assert "kernel module is loaded" in (driver_evidence(tmp_path) or "")


def test_the_control_device_is_evidence(tmp_path):
    layout(tmp_path, {"dev/nvidiactl": ""})
    assert driver_evidence(tmp_path) == "/dev/nvidiactl exists"


def test_an_nvidia_gpu_on_the_pci_bus_is_evidence_even_without_a_driver(tmp_path):
    dev = "sys/bus/pci/devices/0000:1b:00.0"
    layout(tmp_path, {f"{dev}/vendor": "0x10de\n", f"{dev}/class": "0x030200\n"})
    assert driver_evidence(tmp_path) == "an NVIDIA GPU is on the PCI bus (0000:1b:00.0)"


def test_an_nvidia_device_that_is_not_a_gpu_is_not_evidence(tmp_path):
    dev = "sys/bus/pci/devices/0000:05:00.0"  # an NVSwitch (bridge class)
    layout(tmp_path, {f"{dev}/vendor": "0x10de\n", f"{dev}/class": "0x068000\n"})
    assert driver_evidence(tmp_path) is None
