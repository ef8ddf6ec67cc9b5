"""What NCCL and PyTorch can tell from inside a job: NCCL RAS, the flight recorder and
its analyzer, PyTorch's debug server. Asked and parsed here; judged in gputui.diagnose.nccl.
"""

from __future__ import annotations

from gputui.faces import lazy_face

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


__getattr__, __dir__ = lazy_face(__name__, _WHERE, __all__, globals())
