"""Whether a name or an address is this machine: one answer for the rendezvous (is the
master here?), the debug server (ask it as a remote host?) and the blamed-host probe (is the
blamed host another one?). Jobs write their master in every form; each is checked against
this machine's real hostname and interface addresses."""

from __future__ import annotations

import socket

import psutil
import pytest

from gputui.collect.this_host import is_this_host
from gputui.tools.gather.rendezvous import judge_job


def an_interface_address() -> str:
    """An address of this machine that is not loopback (CI boxes have one), else skip."""
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    pytest.skip("this machine has no IPv4 address but loopback")


@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "127.0.0.1",
        "127.0.1.1",
        "::1",
        "[::1]",
        "0.0.0.0",
        "::ffff:127.0.0.1",
        "LOCALHOST",
    ],
)
def test_loopback_in_every_spelling_is_this_host(host):
    assert is_this_host(host)


def test_the_hostname_short_or_qualified_is_this_host():
    me = socket.gethostname()
    short = me.split(".", 1)[0]
    assert is_this_host(me)
    assert is_this_host(me.upper())
    assert is_this_host(f"{short}.cluster.example")  # the launcher qualified it, DNS not asked
    assert is_this_host(short)


def test_an_address_of_one_of_its_interfaces_is_this_host():
    """MASTER_ADDR=$(hostname -i) in a launch script: the store is here."""
    assert is_this_host(an_interface_address())


@pytest.mark.parametrize(
    "host", ["192.0.2.7", "2001:db8::1", "node-that-is-not-this-one", "", None, "   ", "[]"]
)
def test_another_host_or_nothing_is_not(host):
    assert not is_this_host(host)


def test_a_qualified_name_of_another_domain_is_not_this_host():
    short = socket.gethostname().split(".", 1)[0]
    assert is_this_host(f"{short}.a.example")
    if "." in socket.gethostname():
        assert not is_this_host(f"{short}.b.example")


def test_a_rendezvous_whose_master_is_this_nodes_address_is_named_without_stacks():
    """Stacks off (--no-auto-dump): a job is named only when its master is here. A master
    written as this node's own address is here, and the record says so."""
    from gputui.collect.model import RankInfo
    from gputui.collect.procs.hostranks import HostRank

    addr = an_interface_address()
    rank = RankInfo(rank=0, world_size=2, master=f"{addr}:29500")
    rs = [HostRank(1, 0.0, rank, "python", master_addr=addr, master_port=29500)]
    entry = judge_job(f"master:{addr}:29500", rs, stacks=False)
    assert entry is not None and entry["master_local"] is True
    assert entry["missing_ranks"] == [1]
