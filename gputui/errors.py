"""Errors that reach the user as one line and an exit status, never as a traceback."""


class GputuiError(Exception):
    """A problem the user can act on; printed as `gputui: <message>`, exit status 2."""

    exit_code = 2
