"""One sanitizer for text that came from outside, before it reaches a terminal or a text file.

Command lines, environments, logs, kernel lines, tool output and recordings are written by
other people's processes. Shown raw, an escape sequence in them can move the cursor, rename
the terminal, or hide a line; a newline in a command line splits a table row. Every text face
passes such text through `clean()`: control characters become visible escapes (`\\x1b`,
`\\n`), printable text (any language) is kept. JSON output does not need this (its encoder
escapes control characters) and stays exact.
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _unsafe(ch: str) -> bool:
    code = ord(ch)
    # C0 controls, DEL, C1 controls (0x9b is a one-byte CSI), and the line/paragraph
    # separators and bidi overrides that can reorder what a terminal shows.
    return (
        code < 0x20
        or 0x7F <= code < 0xA0
        or code in (0x2028, 0x2029)
        or 0x202A <= code <= 0x202E
        or 0x2066 <= code <= 0x2069
    )


def clean(
    text: str, *, keep_newlines: bool = False, keep_tabs: bool = False, limit: int = 0
) -> str:
    """`text` with every control character shown as an escape.

    keep_newlines: multi-line text (a stack, a log tail) keeps its line breaks, but a
    carriage return never survives (it would overwrite the line on screen).
    limit: at most this many characters of the result (0: no limit), ending in "…" when cut.
    """
    if not isinstance(text, str):
        text = str(text)
    if any(_unsafe(ch) for ch in text):
        text = "".join(
            ch
            if not _unsafe(ch) or (keep_newlines and ch == "\n") or (keep_tabs and ch == "\t")
            else _escape(ch)
            for ch in text
        )
    if limit and len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def clean_lines(text: str, limit: int = 0) -> str:
    """Multi-line text made safe: line breaks kept, every other control character escaped."""
    return clean(text, keep_newlines=True, limit=limit)
