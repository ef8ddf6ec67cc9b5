"""Allow `python -m gputui`."""

from gputui.cli import main

raise SystemExit(main())
