"""What NCCL and PyTorch can tell from inside a job: NCCL RAS, the flight recorder and
its analyzer, PyTorch's debug server. Asked and parsed here; judged in gputui.diagnose.nccl.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "answer_from_dict",
    "answer_to_dict",
    "flight_record",
    "FrRank",
    "gather_debugserver",
    "job_interpreter",
    "JobSide",
    "KIND",
    "parse_addr",
    "query_ras",
    "ranks_of_record",
    "RasAnswer",
    "RasComm",
    "RasRank",
    "read_dump",
]
# Each name of the face -> the module of this package that defines it.
_WHERE = {
    "gather_debugserver": "debugserver",
    "read_dump": "debugserver",
    "parse_addr": "debugserver_find",
    "KIND": "debugserver_parse",
    "ranks_of_record": "debugserver_parse",
    "flight_record": "flightrec",
    "FrRank": "flightrec",
    "job_interpreter": "flightrec",
    "JobSide": "ras",
    "query_ras": "ras",
    "answer_from_dict": "ras_model",
    "answer_to_dict": "ras_model",
    "RasAnswer": "ras_model",
    "RasComm": "ras_model",
    "RasRank": "ras_model",
}


def __getattr__(name: str) -> Any:
    """A name of the face, imported on first use (PEP 562): importing one module of this
    package (the dashboard's first frame imports a few) does not import the others."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
