"""Recordings: the file format and its writer, the bounded reader of untrusted files, the
shape of every record type, a window of a day-long file, and `check --json` lines read back;
history files of readings alone (plain GPU lines, nvidia-smi's CSV) held as columns.
"""
