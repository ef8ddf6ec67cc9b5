"""Is a job stuck, and where: the per-GPU class, the hang detector, the culprit's line from
stacks, rendezvous, progress (busy). The jobs' groups (job_groups) and the ranks in different
collectives (collective_mismatch) sit one floor below, shared with slow/ and the evidence fold.
"""
