"""Tool output is redacted where it is read, once: before `on_line` sees a line, in
`ToolResult.lines`, and in the messages built from them, so every face (pane, saved file,
`dump --json`, bundle, automatic dumps) gets redacted text without redacting itself."""

from __future__ import annotations

import sys

from gputui.redact import REDACTED
from gputui.tools.result import Outcome
from gputui.tools.runner import run_tool

SCRIPT = r"""
import sys
print("Process 42: python train.py --pw hunter2-a --lr 0.1", flush=True)
print('write(3, "password=hunter2-b\\n", 18) = 18', flush=True)
print("fatal: Authorization: Bearer hunter2-c-token", flush=True)
sys.exit(3)
"""


def test_every_line_is_redacted_before_anyone_sees_it():
    seen: list[str] = []
    res = run_tool([sys.executable, "-c", SCRIPT], timeout=30, on_line=seen.append)
    assert res.outcome is Outcome.FAILED
    assert (
        seen
        == list(res.lines)
        == [
            f"Process 42: python train.py --pw {REDACTED} --lr 0.1",
            f'write(3, "password={REDACTED}", 18) = 18',
            f"fatal: Authorization: Bearer {REDACTED}",
        ]
    )
    # the failure message quotes the last line: redacted too, and so is the JSON
    assert res.message == f"exited with status 3: fatal: Authorization: Bearer {REDACTED}"
    assert "hunter2" not in str(res.to_json()) and "hunter2" not in res.summary()
