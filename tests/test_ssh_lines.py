"""Every ssh command line gputui runs comes from one module (gputui.tools.fleet.ssh), and each
keeps the options it needs: BatchMode where ssh connects (a prompt would wait forever),
ConnectTimeout where ssh itself is the launcher, and the user's --ssh-config and --ssh-option
in the same order everywhere. The lines reach a real sshd in tests/test_fleet.py and
tests/test_world_probe.py; here each is read word by word."""

from __future__ import annotations

from gputui.tools.fleet.ssh import config_argv, pdsh_append, ssh_argv

USER = {"config": "/etc/gputui/ssh_config", "options": ["Port=2222", "User=ops"]}
USER_WORDS = ["-F", "/etc/gputui/ssh_config", "-o", "Port=2222", "-o", "User=ops"]


def test_ssh_to_a_host_never_prompts_and_gives_up_a_connection_in_whole_seconds():
    argv = ssh_argv("node-1", "gputui check --json", connect_timeout=2.5, **USER)
    assert argv == [
        "ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=3", *USER_WORDS,
        "--", "node-1", "gputui check --json",
    ]  # fmt: skip


def test_without_user_options_ssh_gets_only_its_own_bounds():
    argv = ssh_argv("n", "cmd", connect_timeout=10)
    assert argv == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "--", "n", "cmd"]


def test_ssh_dash_g_reads_the_users_configuration_and_connects_to_nothing():
    assert config_argv("alias-7", **USER) == ["ssh", "-G", *USER_WORDS, "--", "alias-7"]
    assert config_argv("alias-7") == ["ssh", "-G", "--", "alias-7"]


def test_pdsh_s_ssh_gets_batch_mode_and_the_users_options_but_pdsh_bounds_the_connection():
    assert pdsh_append(**USER) == " ".join(["-o", "BatchMode=yes", *USER_WORDS])
    assert pdsh_append() == "-o BatchMode=yes"
    assert "ConnectTimeout" not in pdsh_append(**USER)  # pdsh -t gives it


def test_a_host_is_never_read_as_an_option():
    for argv in (ssh_argv("-oProxyCommand=x", "c", connect_timeout=1), config_argv("-x")):
        assert argv[argv.index("--") + 1].startswith("-")  # after --: a host name, whatever it is
