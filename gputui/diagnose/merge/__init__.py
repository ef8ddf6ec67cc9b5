"""Many nodes' `check --json` lines -> one job-wide verdict: the join, stacks across nodes,
a straggler across nodes, and each node's line.
"""
