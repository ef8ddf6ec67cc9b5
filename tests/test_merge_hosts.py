"""`merge --json` names each rank's stack by the host the rank runs on, as its text does.

One node watched as two (`--gpus 0 --host a`, `--gpus 1 --host b`): a stalls and carries the
recorded stacks of both ranks, but rank 1 runs on b. The text said `suspects: b:1` while the
JSON's `stack_groups` said "rank 1 on a".
"""

from __future__ import annotations

import json

from conftest import run_cli
from test_merge import check_lines, demo_until_stall  # noqa: F401 - the fixture


def test_stack_groups_put_rank_1_on_b_like_the_suspects(demo_until_stall, tmp_path):  # noqa: F811
    for host, gpu in (("a", "0"), ("b", "1")):
        lines = check_lines("--replay", demo_until_stall, "--gpus", gpu, "--host", host)
        (tmp_path / f"{host}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    files = [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    last = json.loads(run_cli("merge", "--json", *files).stdout.splitlines()[-1])
    assert last["suspects"] == ["b:1"]
    groups = last["stack_groups"]
    assert any(g.startswith("rank 1 on b in") for g in groups), groups
    assert any(g.startswith("rank 0 on a in") for g in groups), groups
    assert not any(g.startswith("rank 1 on a") for g in groups), groups
    text = run_cli("merge", *files).stdout
    assert "suspects: b:1 (rank 1)" in text and "  rank 1 on b in" in text
