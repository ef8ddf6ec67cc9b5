"""Options mean the same wherever they are typed: before the sub-command or after it.

`gputui --demo check` once checked the live node (the sub-command's parser wrote its own
default over the `--demo` typed before it) and said nothing; these tests hold every
sub-command that takes source options to the same meaning in both places, and an option a
sub-command does not take to one error line that names that sub-command's --help.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from gputui.cli import build_parser
from gputui.commands.argorder import reorder
from gputui.errors import GputuiError

# Every sub-command that takes --demo/--replay (add_source_args).
SOURCE_COMMANDS = ("snapshot", "check", "bundle", "exporter")


def parse(*argv: str):
    parser = build_parser()
    return parser.parse_args(reorder(parser, list(argv)))


@pytest.mark.parametrize("command", SOURCE_COMMANDS)
def test_demo_before_the_sub_command_is_the_same_as_after_it(command):
    before, after = parse("--demo", command), parse(command, "--demo")
    assert before.command == after.command == command
    assert before.demo is True and after.demo is True


@pytest.mark.parametrize("command", SOURCE_COMMANDS)
def test_replay_and_gpus_before_the_sub_command_reach_it(command):
    for argv in (["--replay", "f.jsonl", "--gpus", "1", command], ["--replay=f.jsonl", command]):
        args = parse(*argv)
        assert args.replay == "f.jsonl", argv
    assert parse("--gpus", "0,1", command).gpus == (0, 1)


def test_json_and_detector_options_before_check_reach_check():
    args = parse("--json", "--stall-after", "3", "--demo", "check", "--hang-after", "9")
    assert (args.json, args.stall_after, args.hang_after, args.demo) == (True, 3.0, 9.0, True)


def test_an_option_the_sub_command_does_not_take_is_one_clear_error():
    parser = build_parser()
    with pytest.raises(GputuiError, match=r"--speed does not apply to `gputui check`.*--help"):
        reorder(parser, ["--speed", "2", "check"])
    with pytest.raises(GputuiError, match=r"--demo does not apply to `gputui merge`"):
        reorder(parser, ["--demo", "merge", "a.jsonl"])


def test_the_dashboard_and_main_help_keep_their_arguments():
    parser = build_parser()
    assert reorder(parser, ["--demo", "--start", "5"]) == ["--demo", "--start", "5"]
    assert reorder(parser, ["--help", "check"]) == ["--help", "check"]
    # A value that happens to be a command name is a value, not the sub-command.
    assert parse("--replay", "check").replay == "check"


def test_demo_check_checks_the_demo_not_the_live_node():
    r = run_cli("--demo", "check", "--json")
    assert "Traceback" not in r.stderr
    hosts = {json.loads(line)["host"] for line in r.stdout.splitlines()}
    assert hosts == {"demo-h200x2-hang"}
    assert any(json.loads(line)["state"] == "stalled" for line in r.stdout.splitlines())


def test_demo_snapshot_shows_the_recording_not_this_host():
    r = run_cli("--demo", "snapshot")
    assert r.returncode == 1, r.stderr  # the demo's moment is a stall
    assert r.stdout.count("NVIDIA H200") == 2


@pytest.mark.parametrize("argv", [("check", "--demo", "--jsno"), ("--demo", "check", "--jsno")])
def test_a_misspelt_option_points_to_the_sub_commands_own_help(argv):
    r = run_cli(*argv)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "gputui check: error: unrecognized arguments: --jsno (see gputui check --help)"
    ]


def test_a_global_option_the_sub_command_lacks_exits_2_with_one_line():
    r = run_cli("--no-mouse", "snapshot")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "gputui: --no-mouse does not apply to `gputui snapshot` (see gputui snapshot --help)"
    ]
