"""Is a job stuck, and where: the per-GPU class, the hang detector and its groups, the
culprit's line from stacks, ranks in different collectives, rendezvous, progress (busy).
"""
