"""The dashboard's screens: details, help, the probe and world probe, tool panes, dialogs."""
