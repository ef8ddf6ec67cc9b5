"""The one fast path of every history file: columns when the file allows, else None.

`read_columns(path)` recognises what the file is from its first bytes and reads it into
gputui.collect.trace.columns.Columns: the CSV of `nvidia-smi --query-gpu=... --format=csv`
(gputui.collect.trace.smi_csv: its own reader, its own one-line errors), the text of
`dcgmi dmon` (gputui.collect.trace.dcgmi: the same), or a recording of plain GPU lines
(gputui.collect.trace.plain_lines). None: a recording with processes or
typed records (gputui's own writer), or one that is not clean: the full reader
(gputui.collect.trace.read) reads it, as it always did.
"""

from __future__ import annotations

from pathlib import Path

from gputui.collect.trace.columns import Columns


def read_columns(path: str | Path) -> Columns | None:
    from gputui.collect.trace.smi_csv import looks_like_smi_csv, read_smi_csv

    if looks_like_smi_csv(path):
        return read_smi_csv(path)
    from gputui.collect.trace.dcgmi import looks_like_dmon, read_dmon

    if looks_like_dmon(path):
        return read_dmon(path)
    from gputui.collect.trace.plain_lines import read_plain

    return read_plain(path)
