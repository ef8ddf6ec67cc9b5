"""gputui: a terminal dashboard for live GPU and process inspection on NVIDIA nodes."""

__version__ = "0.2.0"
