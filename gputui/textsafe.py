"""One sanitizer for text that came from outside, before it reaches a terminal or a text file.

Command lines, environments, logs, kernel lines, tool output and recordings are written by
other people's processes. Shown raw, an escape sequence in them can move the cursor, rename
the terminal, or hide a line; a newline in a command line splits a table row. Every text face
passes such text through `clean()`: control characters become visible escapes (`\\x1b`,
`\\n`), printable text (any language) is kept. JSON output does not need this (its encoder
escapes control characters) and stays exact.
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# C0 controls, DEL, C1 controls (0x9b is a one-byte CSI, 0x9d a one-byte OSC), the line and
# paragraph separators and the bidi overrides and isolates that can reorder what a terminal
# shows, the zero-width and bidi marks (U+200B-U+200F, U+061C, U+2060-U+2064, U+FEFF: a
# terminal draws them in no cell while the width count gives each one, so a pane's right
# border moves, and a mark reorders what follows), and lone surrogates (no terminal encoding
# can write them: an encoder would raise).
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069"
    "\ufeff\ud800-\udfff]"
)


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _escape_all(m: re.Match[str]) -> str:
    return _escape(m.group(0))


def _escape_but_newlines(m: re.Match[str]) -> str:
    ch = m.group(0)
    return ch if ch == "\n" else _escape(ch)


def _escape_but_tabs(m: re.Match[str]) -> str:
    ch = m.group(0)
    return ch if ch == "\t" else _escape(ch)


def _escape_but_both(m: re.Match[str]) -> str:
    ch = m.group(0)
    return ch if ch in "\n\t" else _escape(ch)


_ESCAPERS = {
    (False, False): _escape_all,
    (True, False): _escape_but_newlines,
    (False, True): _escape_but_tabs,
    (True, True): _escape_but_both,
}


def is_clean(text: str) -> bool:
    """Whether `text` holds nothing that `clean()` would escape (a test of what is drawn)."""
    return _UNSAFE.search(text) is None


def clean(
    text: str, *, keep_newlines: bool = False, keep_tabs: bool = False, limit: int = 0
) -> str:
    """`text` with every control character shown as an escape.

    keep_newlines: multi-line text (a stack, a log tail) keeps its line breaks, but a
    carriage return never survives (it would overwrite the line on screen).
    limit: at most this many characters of the result (0: no limit), ending in "…" when cut.
    Cleaning clean text changes nothing, so a second pass (a drawing helper after a face
    that cleaned already) is harmless, and cheap: one regular-expression search.
    """
    if not isinstance(text, str):
        text = str(text)
    if _UNSAFE.search(text) is not None:
        text = _UNSAFE.sub(_ESCAPERS[keep_newlines, keep_tabs], text)
    if limit and len(text) > limit:
        text = text[: max(0, limit - 1)] + "…"
    return text


def clean_lines(text: str, limit: int = 0) -> str:
    """Multi-line text made safe: line breaks kept, every other control character escaped."""
    return clean(text, keep_newlines=True, limit=limit)
