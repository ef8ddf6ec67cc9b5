"""Where secrets stand in text: after a secret name, after a secret option, in a URL.

Each rule yields the spans of the secrets it finds (the value only: `--pw <redacted>`,
`postgres://u:<redacted>@db`), for scan.py to merge and replace. Values followed to their end
(quoted, bracketed, the rest of a header line, a URL) are bounded by MAX_VALUE, and a rule
skips the matches that fall inside a value it has already taken, so each rule stays linear
in the length of the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gputui.redact.formats import Span
from gputui.redact.names import holds_a_path, is_secret_name, looks_like_path

REDACTED = "<redacted>"
MAX_VALUE = 4096  # longest quoted value, URL or bracketed value followed to its end
_V = MAX_VALUE
USER_OPTIONS = frozenset({"-u", "--user", "--proxy-user", "-U"})  # user:password

# ----------------------------------------------------------------- URLs

_SCHEME = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}://")
_URL_END = re.compile(r"[\s\"'<>`]")
_USER = re.compile(r"[^:/@?#\[\]]*:")
_PORT = re.compile(r"\d{1,5}(?:[/?#]|$)")
_HOST = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~%]+)(?::\d{0,5})?(?:[/?#,;]|$)")


def url_spans(text: str) -> Iterator[Span]:
    """The password of `scheme://user:password@host`, read from the right: the password
    runs to the last `@` that a host follows, so it may hold `@` and `/`."""
    if "://" not in text:
        return
    done = 0  # where the last URL looked at ends: a scheme inside it is not a new URL
    for m in _SCHEME.finditer(text):
        start = m.end()
        if m.start() < done:
            continue
        end_m = _URL_END.search(text, start, start + MAX_VALUE)
        end = end_m.start() if end_m else min(len(text), start + MAX_VALUE)
        done = end
        at = text.rfind("@", start, end)
        u = _USER.match(text, start, end) if at >= 0 else None
        if u is None or _PORT.match(text, u.end(), end):
            continue  # no userinfo, or host:port/... without a password
        p0 = u.end()
        q = text.find("?", p0, end)
        best = -1
        while at >= p0:  # from the right: the last @ that a host follows, before any ?query
            if _HOST.match(text, at + 1, end):
                if q < 0 or at < q:
                    best = at
                    break
                best = at if best < 0 else best
            at = text.rfind("@", p0, at)
        if best > p0:
            yield p0, best


# ----------------------------------------------------------------- name = value, name: value

_SRC_EXT = re.compile(r"\.(?:py|pyx|pxd|c|cc|cpp|cxx|h|hpp|cu|cuh|so|rs|go|js|ts|java|rb)$")
_PAIR = re.compile(
    r"(?<![\w.\-])(?P<q>[\"']?)(?P<name>-{0,2}[A-Za-z_][\w.\-]{0,200})(?P=q)"
    r"[ \t]*(?P<sep>=(?![=>])|:(?!//|:))[ \t]*"
)
QUOTED = {q: re.compile(rf"{q}((?:[^{q}\\]|\\.){{0,{_V}}}){q}") for q in "\"'"}
_BARE_VALUE = re.compile(rf"(?!<optimized out>|<synthetic pointer>)[^\s&;,\"'`)\]}}]{{1,{_V}}}")
_LINE_REST = re.compile(rf"[^\r\n\"'`]{{1,{_V}}}")
_AUTH_SCHEME = re.compile(r"(?i)(?:Bearer|Basic|Digest|Token|Bot|Negotiate|AWS4-HMAC-SHA256)\s+")
_HEADER_NAMES = ("AUTHORIZATION", "PROXY-AUTHORIZATION", "COOKIE", "SET-COOKIE")
# gdb prints a string argument as `name=0x5555... "text"` (or name=name@entry=0x...).
_GDB_POINTER = re.compile(r"(?:\w+@entry=)?0x[0-9a-fA-F]+\s+\"")
_GDB_ARG = re.compile(r"(?<![\w.])(?P<name>[A-Za-z_]\w{0,200})=(?:\w+@entry=)?0x[0-9a-fA-F]+\s+\"")


def _balanced_end(text: str, i: int) -> int:
    """End of the [...] or {...} that starts at i (strings respected), bounded."""
    depth, j, n = 0, i, min(len(text), i + MAX_VALUE)
    while j < n:
        c = text[j]
        if c in "\"'":
            m = QUOTED[c].match(text, j)
            j = m.end() if m else j + 1
            continue
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return n


def _value_span(text: str, m: re.Match[str]) -> Span | None:
    """Where the value after `name=` / `name: ` / `"name": ` ends."""
    i = m.end()
    if i >= len(text):
        return None
    c = text[i]
    if c in "\"'":
        v = QUOTED[c].match(text, i)
        return (i + 1, v.end() - 1) if v else None
    if c in "[{":
        return i, _balanced_end(text, i)
    name = m["name"].upper()
    spaced = m["sep"] == ":" and m.end() > m.end("sep") and not m["q"]
    if name in _HEADER_NAMES or spaced:  # a header or `key: value`: the rest of the line
        a = _AUTH_SCHEME.match(text, i)
        if a:
            i = a.end()
        v = _LINE_REST.match(text, i)
        return (i, v.end()) if v else None
    v = _BARE_VALUE.match(text, i)
    return (i, v.end()) if v else None


def pair_spans(text: str) -> Iterator[Span]:
    """Values of secret names: `NAME=v`, `name: v`, `"name": "v"`, `'name': v`, `Password=v;`,
    `&token=v`, headers. Quoted and bracketed values are taken whole."""
    if "=" not in text and ":" not in text:
        return
    done = 0  # end of the last secret value: names inside it are part of the secret
    for m in _PAIR.finditer(text):
        if m.start() < done:
            continue
        name = m["name"]
        if not is_secret_name(name) or text.endswith("//", 0, m.start()):
            continue  # not secret, or `scheme://user:password@`, which url_spans reads
        span = _value_span(text, m)
        if span is None:
            continue
        value = text[span[0] : span[1]]
        if m["sep"] == ":" and value.isdigit() and _SRC_EXT.search(name):
            continue  # secrets.py:12 is a file and a line
        if _GDB_POINTER.match(text, span[0]):
            continue  # gdb's `password=0x5555 "..."`: the address; gdb_arg_spans takes the string
        if holds_a_path(name) and looks_like_path(value):
            continue
        done = span[1]
        yield span


def gdb_arg_spans(text: str) -> Iterator[Span]:
    """The string gdb prints after a secret-named argument's address."""
    if "0x" not in text:  # cheap: most text holds no address at all
        return
    for m in _GDB_ARG.finditer(text):
        if is_secret_name(m["name"]):
            v = QUOTED['"'].match(text, m.end() - 1)
            if v:
                yield v.start() + 1, v.end() - 1


# ----------------------------------------------------------------- options

# A flag starts a word, or follows a quote, bracket, comma or shell operator. The value is
# matched inside a lookahead, so that it is not consumed: in `-p --password X`, `--password`
# is both the value looked at for -p and a flag of its own.
_FLAG = re.compile(
    r"(?<![^\s\"'(\[,;|&])(?P<flag>--?[A-Za-z][\w.\-]{0,200})[ \t]+"
    rf"(?=(?P<value>\"(?:[^\"\\]|\\.){{0,{_V}}}\"|'[^']{{0,{_V}}}'|[^\s\"']{{1,{_V}}}))"
)
_LOOKS_LIKE_OPTION = re.compile(r"-{1,2}[A-Za-z]")
# -pSECRET (mysql); but not gcc's -pthread or find's -path, and not `-pw`, an option itself.
_GLUED_P = re.compile(rf"(?<![^\s\"'(\[,;|&])-p(?P<value>[^\s\"'=][^\s\"']{{0,{_V}}})")
_NOT_GLUED_P = frozenset(
    "thread ipe edantic edantic-errors g ie ic ath erm rune rint rintf rint0 rofile rogress "
    "retty ush ull arallel ort ackage ython ython3 latform lugin ersistent id".split()
)


_P_WORD_OPTIONS = frozenset(
    "pw pwd pass passwd password passphrase passin passout passfile pin".split()
)


def is_glued_p(arg: str) -> bool:
    """`-pSECRET`: a password glued to -p, as mysql takes it."""
    return (
        arg.startswith("-p")
        and len(arg) > 2
        and arg[2] not in "=-"
        and arg[2:] not in _NOT_GLUED_P
        # -pw, -pass, -passwd: options that take the next word. Only these spellings: a
        # password that happens to hold a secret word (`-pSECRET`, `-pmypassword`) is still
        # the password, and the word after it (mysql's database) is not.
        and arg[1:].lower() not in _P_WORD_OPTIONS
    )


def takes_any_value(flag: str) -> bool:
    """Whether the word after `flag` is its value even when it looks like an option
    (`--password --dashPW33`): every secret-named option but the short ones, whose letter
    means a password to some tools only (`mkdir -p -m 755`, `curl -u -v`)."""
    return flag.startswith("--") or (len(flag) > 2 and flag not in USER_OPTIONS)


def flag_spans(text: str) -> Iterator[Span]:
    """In a command line read as text: `--pw v` (whatever v looks like: `--pw --dashX`),
    `-p v` (not a path, not an option), `-pv`, `-u user:v`."""
    if "-" not in text:
        return
    done = 0  # end of the last value taken: a flag inside it is part of the secret
    for m in _FLAG.finditer(text):
        if m.start() < done:
            continue
        flag, value = m["flag"], m["value"]
        option_like = _LOOKS_LIKE_OPTION.match(value) is not None
        if flag in USER_OPTIONS and ":" in value and not option_like:
            yield m.start("value") + value.index(":") + 1, m.end("value")
            continue
        if not is_secret_name(flag) or value == REDACTED:
            continue
        if option_like and not takes_any_value(flag):
            continue
        if (flag == "-p" or holds_a_path(flag)) and looks_like_path(value):
            continue
        a, b = m.span("value")
        done = b
        if value[0] in "\"'":
            a, b = a + 1, b - 1
        yield a, b
    for m in _GLUED_P.finditer(text):
        if is_glued_p("-p" + m["value"]) and m["value"] != REDACTED:
            yield m.span("value")


# ~/.netrc, as curl, pip and git read it: `machine h login u password p`.
NETRC_PASSWORD = re.compile(r"(?<![\w\-])login[ \t]+\S+[ \t]+password[ \t]+(?P<v>[^\s\"']+)")
AUTH_VALUE = re.compile(
    r"(?<![\w\-])(?:(?i:bearer|basic)|Token|Bot)\s+(?P<v>[A-Za-z0-9._~+/\-]{8,}=*)"
)


def auth_and_netrc_spans(text: str) -> Iterator[Span]:
    """`Bearer X` / `Basic X` / `Token X` / `Bot X`, and netrc's `login u password X`
    (each tried only when its word is there at all)."""
    lower = text.lower()
    if "bearer" in lower or "basic" in lower or "Token" in text or "Bot" in text:
        yield from (m.span("v") for m in AUTH_VALUE.finditer(text))
    if "password" in text:
        yield from (m.span("v") for m in NETRC_PASSWORD.finditer(text))
