"""Reading the kernel log's Xid lines: the real H100 lines, the catalogue's forms, bad lines.

tests/data/health/ holds what the kernel log said when a program faulted on an H100 (Xid 31
and 43, see its README) and /dev/kmsg records of the forms that cannot be caused on purpose.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gputui.collect.kernlog import KernelLine, KernelLog, parse_record
from gputui.collect.nvml import xid as X
from gputui.diagnose.slow.clocks import clock_reasons, hardware_slowdown

DATA = Path(__file__).parent / "data" / "health"
REAL = json.loads((DATA / "xid-h100.json").read_text())
KMSG = (DATA / "kmsg-xid.txt").read_bytes().splitlines()


def _real_line(case: str) -> str:
    """The kernel line as dmesg printed it, without dmesg's time prefix."""
    return REAL["cases"][case]["kernel_log"][0].split(" ", 1)[1]


def test_the_real_xid_31_line_names_the_gpu_by_pci_and_the_process_by_pid():
    ev = X.parse_line(_real_line("illegal_address"), 100.0)
    assert ev is not None
    assert (ev.xid, ev.pci, ev.pid, ev.name, ev.source) == (
        31,
        "0000:00:06",
        599,
        "python3",
        "kernel",
    )
    assert X.info(31).kind == X.PROGRAM  # a fault of the program; the GPU is fine


def test_the_real_xid_43_line_is_a_program_fault_too():
    ev = X.parse_line(_real_line("device_assert"), 1.0)
    assert ev is not None and (ev.xid, ev.pid) == (43, 662)
    assert X.info(43).kind == X.PROGRAM and X.info(43).severity == X.OK


def test_nvml_and_kernel_pci_forms_are_one_key():
    """NVML says 00000000:00:06.0, the kernel log 0000:00:06: the same GPU."""
    assert X.pci_key(REAL["gpu_pci_bus_id"]) == X.pci_key("0000:00:06") == "0000:00:06"
    assert X.pci_key("not a bus id") is None


def test_kmsg_records_give_each_xid_with_its_gpu_and_skip_the_rest():
    lines = [r for r in (parse_record(raw, 1000.0) for raw in KMSG) if r is not None]
    events = X.xid_events(lines, {"0000:00:06": 0, "0000:18:00": 1, "0000:19:00": 2})
    got = [(e.xid, e.gpu, e.pid) for e in events]
    assert got == [
        (31, 0, 599),
        (43, 0, 662),
        (79, 1, None),  # pid='<unknown>'
        (79, 1, None),  # "GPU has fallen off the bus" without an Xid number
        (48, 2, 1200),
        (94, 2, 1200),
        (154, None, None),  # a GPU the map does not know keeps its PCI address
    ]
    assert events[-1].pci == "0000:1a:00"
    assert X.recovery_action(events[-1].text) == "GPU Reset Required"
    assert events[0].t == pytest.approx(1002.0)  # boot time + the record's microseconds


def test_a_malformed_record_or_line_is_skipped_never_raised():
    assert parse_record(b"no semicolon", 0.0) is None
    assert parse_record(b"4,12,abc,-;text", 0.0) is None
    assert parse_record(b"4;text", 0.0) is None
    for text in ("NVRM: Xid (PCI:zz:00:00): 31", "NVRM: Xid (PCI:0000:18:00): x", "", "Xid 79"):
        assert X.parse_line(text, 0.0) is None
    assert X.xid_events([object(), KernelLine(0.0, 1, "NVRM: Xid (PCI:0000:18:00): 999999")]) == []


def test_the_catalogue_sorts_hardware_from_program_faults():
    assert X.info(79).kind == X.HARDWARE and X.info(79).severity == X.FAILED
    assert X.info(79).meaning == "GPU fell off the bus" and X.info(79).action == "drain the node"
    for n in (48, 64, 74, 95, 119, 120, 154):
        assert X.info(n).severity == X.FAILED, n
    for n in (63, 92, 94):
        assert X.info(n).severity == X.DEGRADED, n
    assert X.info(12345).kind == X.HARDWARE and "catalogue" in X.info(12345).action


def test_clock_event_reasons_as_words_and_the_hardware_ones_alone():
    assert clock_reasons(1) == ["idle"]
    assert clock_reasons(0x4 | 0x8 | 0x80) == ["power cap", "HW slowdown", "HW power brake"]
    assert hardware_slowdown(0x4 | 0x40) == ["HW thermal slowdown"]
    assert clock_reasons(None) == [] and hardware_slowdown(0) == []


# ------------------------------------------------------------ the follower


def test_the_follower_reads_each_new_record_once_from_a_fifo(tmp_path):
    """A FIFO stands in for /dev/kmsg: one record per write, a read never blocks."""
    fifo = tmp_path / "kmsg"
    os.mkfifo(fifo)
    log = KernelLog(str(fifo))
    assert log.poll() == [] and log.error is None  # nothing yet, and no wait
    w = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(w, KMSG[1] + b"\n")
        first = log.poll()
        os.write(w, KMSG[3] + b"\n")
        second = log.poll()
    finally:
        os.close(w)
        log.close()
    assert [line.seq for line in first] == [1202] and "Xid" in first[0].text
    assert [line.seq for line in second] == [1204]
    assert [e.xid for e in X.xid_events(first + second)] == [31, 43]


def test_a_kernel_log_that_is_not_there_is_said_once_and_polls_return_nothing(tmp_path):
    log = KernelLog(str(tmp_path / "absent"))
    assert log.poll() == [] and log.poll() == []
    assert log.error is not None and "not readable here" in log.error


def test_a_kernel_log_that_cannot_be_read_says_why(tmp_path):
    log = KernelLog(str(tmp_path))  # a directory: open works, read fails (EISDIR)
    assert log.poll() == []
    assert log.error is not None and "could not be read" in log.error


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_no_permission_names_dmesg_restrict(tmp_path):
    p = tmp_path / "kmsg"
    p.write_text("")
    p.chmod(0)
    log = KernelLog(str(p))
    assert log.poll() == [] and "dmesg_restrict" in (log.error or "")


def test_a_refused_kernel_log_says_what_it_needs(monkeypatch, tmp_path):
    """The refusal itself (dmesg_restrict) cannot be caused as root: open is made to refuse."""
    import errno

    import gputui.collect.kernlog as kl

    def refuse(*_a, **_k):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(kl.os, "open", refuse)
    log = KernelLog(str(tmp_path / "kmsg"))
    assert log.poll() == []
    assert "dmesg_restrict" in (log.error or "") and "NVML alone" in (log.error or "")
