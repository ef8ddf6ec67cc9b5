"""Host processes, read through psutil and /proc: the process table, jobs and ranks from
the environment, owners (pods, Slurm), PID namespaces, where ranks write, their progress.
"""
