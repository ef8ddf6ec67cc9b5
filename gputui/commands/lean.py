"""What the dashboard does at its start to stay light in memory.

Why: on a 4 x H200 node gputui's peak RSS was 61.7 MB against nvitop's 45.4 MB, and most of
the difference is what the dashboard's libraries bring, not its own data (BENCHMARKS.md,
section 14). Two levers cost nothing in behaviour:

- `one_malloc_arena()`: glibc gives each thread that allocates an arena of its own (up to 8
  per core), and each arena keeps pages of its own once freed. The dashboard has about ten
  threads that allocate little and rarely (the sampler, NVML's, the Xid wait, Textual's
  input and output): one arena for all of them is about 1 MB less resident, and the lock
  they share is never contended at a sample a second.
- `without_tls()`: asyncio imports `ssl` when it is first imported (for TLS transports),
  and `ssl` maps OpenSSL's libcrypto and libssl: about 4 MB resident. The dashboard never
  opens a TLS connection. While Textual (and with it asyncio) is imported, `import ssl`
  fails, which asyncio takes as "no TLS support"; afterwards `ssl` imports as usual for any
  code that wants it later.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Iterator

M_ARENA_MAX = -8  # mallopt's parameter number (glibc's malloc.h)


def one_malloc_arena() -> bool:
    """Every thread allocates from glibc's main arena; call it before threads start.
    False where the C library has no mallopt (musl, macOS): nothing changes there."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, 1))


@contextlib.contextmanager
def without_tls() -> Iterator[None]:
    """`import ssl` fails inside the block, unless ssl or asyncio is imported already (then
    nothing is saved and nothing changes); afterwards it works again."""
    if "ssl" in sys.modules or "asyncio" in sys.modules:
        yield
        return
    sys.modules["ssl"] = None  # type: ignore[assignment]  # the import system's "not here"
    try:
        yield
    finally:
        if "ssl" in sys.modules and sys.modules["ssl"] is None:
            del sys.modules["ssl"]
