"""Textual's key thread waits longer while nothing is typed, and as Textual does once a key
comes: a lone Escape still closes a prompt, `q` still quits (gputui.ui.calm_input).

The waits are checked by what CalmSelector asks select() for (no clock is raced); the keys in
a real terminal (tmux) against the stand-in libnvidia-ml.so.1, where Textual's own Linux
driver reads them.
"""

from __future__ import annotations

import os
import selectors
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nvml_standin.build import build_standin, standin_env
from tmux import Tmux, needs_tmux

from gputui.ui import calm_input as C


class Asked(C.CalmSelector):
    """A CalmSelector that records the timeout it passes on to select()."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[float | None] = []

    def select(self, timeout: float | None = None) -> list:
        real = selectors.SelectSelector.select

        def spy(me: selectors.SelectSelector, t: float | None = None) -> list:
            self.asked.append(t)
            return real(me, 0)

        selectors.SelectSelector.select = spy  # type: ignore[method-assign]
        try:
            return super().select(timeout)
        finally:
            selectors.SelectSelector.select = real  # type: ignore[method-assign]


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    r, w = os.pipe()
    yield r, w
    os.close(r)
    os.close(w)


def test_after_a_quiet_second_a_short_wait_is_stretched_and_input_brings_it_back(pipe):
    r, w = pipe
    sel = Asked()
    sel.register(r, selectors.EVENT_READ)
    assert sel.select(0.1) == [] and sel.asked[-1] == 0.1  # just started: Textual's wait
    sel.last_input -= C.QUIET_AFTER_S + 0.5  # a quiet second and a half ago
    sel.select(0.1)
    assert sel.asked[-1] == C.IDLE_WAIT_S
    os.write(w, b"q")
    assert [key.fd for key, _ in sel.select(0.1)] == [r]  # input: returned as it comes
    os.read(r, 1)
    sel.select(0.1)
    assert sel.asked[-1] == 0.1  # a key just came: Textual's own wait again
    sel.select(None)
    assert sel.asked[-1] is None  # no timeout asked: none invented
    sel.close()


def test_textuals_linux_driver_waits_with_it_once_asked(monkeypatch):
    from textual.drivers import linux_driver

    monkeypatch.setattr(linux_driver, "selectors", linux_driver.selectors)  # put back after
    assert C.calm_input() is True
    assert linux_driver.selectors.SelectSelector is C.CalmSelector
    assert linux_driver.selectors.EVENT_READ == selectors.EVENT_READ
    assert C.calm_input() is True  # twice is once
    assert selectors.SelectSelector is not C.CalmSelector  # nobody else's selectors changed


@pytest.fixture(scope="module")
def nvml_lib() -> Path:
    return build_standin()


@needs_tmux
def test_after_a_quiet_while_escape_closes_the_filter_and_q_quits(nvml_lib):
    env = standin_env(nvml_lib, "ok")
    keep = ("LD_LIBRARY_PATH", "GPUTUI_STANDIN_NVML", "PYTHONPATH")
    t = Tmux(120, 30)
    try:
        t.start([sys.executable, "-m", "gputui"], {k: env[k] for k in keep if k in env})
        t.wait_for("GPU 1", "q quit")
        # Time passes with no key (not a wait for something to happen): the key thread's
        # waits are the long ones from here on.
        time.sleep(C.QUIET_AFTER_S + C.IDLE_WAIT_S)
        t.keys("/")
        t.wait_for("filter:")
        t.keys("Escape")
        t.wait_gone("filter:", timeout=5)
        time.sleep(C.QUIET_AFTER_S + C.IDLE_WAIT_S)
        t.keys("q")
        deadline = time.monotonic() + 10
        while not t.pane_dead():
            assert time.monotonic() < deadline, "q did not end gputui"
            time.sleep(0.05)
    finally:
        t.close()
