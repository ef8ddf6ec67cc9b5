"""The Textual UI: the only layer that imports textual."""
