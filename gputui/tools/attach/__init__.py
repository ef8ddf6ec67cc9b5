"""Tools attached to one process or a job's ranks: py-spy, gdb/cuda-gdb, strace, with the
ptrace checks around each attach; dump-all, core files, the straggler's profile, the way out.
"""
