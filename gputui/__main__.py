"""Allow `python -m gputui` (through the entry point: Ctrl-C during start-up is quiet)."""

from gputui.entry import main

raise SystemExit(main())
