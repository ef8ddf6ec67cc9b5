"""What the dashboard's keys do, as mixins of the app: process actions, table actions,
the keys offered now, the blamed GPU's probe, the way out, the demo's story.
"""
