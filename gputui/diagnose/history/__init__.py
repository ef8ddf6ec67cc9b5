"""The hang detector over a cluster's history (`check --prometheus`): the same per-GPU rule
as the live detector (gputui.diagnose.hang.classify, runs), run over columns per job
instead of one Snapshot per sample, across nodes.

`jobs` groups GPUs into jobs from their labels, `samples` turns a step of columns into the
live detector's GPU sample, `judge` follows each job's spinning over the window and says
when it stalled, who spun and who did not, `counters` reads Xids and error counters (resets
included), `slow` asks the straggler rule of gputui.diagnose.slow over the window.
"""
