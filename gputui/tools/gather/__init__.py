"""The Watcher's gatherers that run tools or read the node: stacks of the stalled job's
ranks, NCCL RAS and the flight recorder, last words, late words, progress, rendezvous.
"""
