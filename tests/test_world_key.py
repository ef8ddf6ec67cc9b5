"""`gputui --probe-hosts LIST`: the probe key (P) runs the whole-world probe over those hosts
instead of this node's GPU pairs; a bad host list is one line, exit 2."""

from __future__ import annotations

import pytest
from conftest import run_cli
from screen import until

from gputui.collect.source import ReplaySource
from gputui.ui.app import GputuiApp
from gputui.ui.screens.world import WorldScreen

pytestmark = pytest.mark.pilot


async def test_p_opens_the_world_probe_over_the_hosts_given():
    app = GputuiApp(
        ReplaySource.demo(realtime=False),
        probe_args={"world_hosts": ["h1", "h2"], "launcher": "local"},
    )
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, WorldScreen))
        screen = app.screen
        assert screen.hosts == ["h1", "h2"] and screen.opts.launcher == "local"
        await pilot.press("c")  # cancel: its workers are stopped
        await until(pilot, lambda: screen.finished, timeout=60)


@pytest.mark.parametrize("hosts", ["-oProxyCommand=x", "node[", ""])
def test_a_bad_probe_host_list_is_one_line_and_exit_2(hosts):
    r = run_cli("--demo", "--probe-hosts", hosts)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "--probe-hosts" in r.stderr, r.stderr
