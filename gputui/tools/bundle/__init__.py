"""The incident bundle: what it writes, the trace that replays to its verdict, last words."""
