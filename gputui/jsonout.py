"""JSON that every parser accepts: what gputui prints on stdout or writes to a file.

Python's json module writes NaN and Infinity by default, which are not JSON: `jq`, a
browser and `json.loads(..., parse_constant=...)` refuse them, so one bad reading would
break a health check's whole output. Every JSON gputui prints or writes goes through
`dumps`, which first turns non-finite floats into null (the same "not available" the rest
of gputui uses) and then serializes with `allow_nan=False`, so a missed case raises here
instead of printing invalid output.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(obj: Any) -> Any:
    """A copy of `obj` with every NaN or infinite float (at any depth) replaced by None.

    Tuples come back as lists (JSON has only arrays); other values are returned as they are.
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def dumps(obj: Any, **kw: Any) -> str:
    """json.dumps for output: non-finite numbers become null; never NaN or Infinity."""
    return json.dumps(finite(obj), allow_nan=False, **kw)
