"""The Textual UI: the only layer that imports textual.

`app` (the dashboard) with its `protocols` (what the key mixins use of it), `keys`,
`messages` and `calm_input`; `widgets` (the line views it draws, and what they draw with:
strips, the palette of roles, the sanitizer's Text); `screens` (details, help, the probes,
tool panes, dialogs); `actions` (what the keys do, as mixins: process and table actions,
the keys offered now, the way out, the demo's story).
"""
