"""Why a rank is gone: its last words (log tails, error files, kernel lines, core files),
found while it lived or after the fact, explained into ranked findings.
"""
