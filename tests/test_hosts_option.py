"""One parser turns a host list given on the command line into hosts (`fleet HOSTS`,
`probe --hosts`, the dashboard's `--probe-hosts`): gputui.collect.hostlist.hosts_option.
Each command keeps its own words in the one line it prints (exit 2); the hostile lists
(huge ranges, @/dev/zero, a file that is not a host list) are in test_hostile_hostlists.py."""

from __future__ import annotations

import pytest

from gputui.collect.hostlist import hosts_option
from gputui.errors import GputuiError


def test_a_list_expands_in_order_without_duplicates():
    assert hosts_option("node[01-03],node02,gpu-a", "fleet") == [
        "node01",
        "node02",
        "node03",
        "gpu-a",
    ]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "fleet: no hosts given"),
        (" , ", "probe --hosts: no hosts given"),
        ("a,-o@b", "fleet: not a host name: '-o@b'"),
        ("node[", "probe --hosts: unbalanced '[' in 'node['"),
    ],
)
def test_a_bad_list_is_one_line_naming_the_option(text, said):
    with pytest.raises(GputuiError) as e:
        hosts_option(text, said.split(":")[0])
    assert str(e.value) == said


@pytest.mark.parametrize("text", ["", "a,-o@b"])
def test_the_dashboard_quotes_a_refused_list_whole(text):
    with pytest.raises(GputuiError) as e:
        hosts_option(text, "--probe-hosts", whole=True)
    assert str(e.value) == f"--probe-hosts: not a host list: {text!r}"


def test_a_user_name_that_looks_like_an_option_never_reaches_a_launcher():
    """`-o@host` is a valid user@host to the expander; a launcher would read it as `-o`."""
    with pytest.raises(GputuiError, match="not a host name: '-oProxyCommand@h'"):
        hosts_option("-oProxyCommand@h", "fleet")
