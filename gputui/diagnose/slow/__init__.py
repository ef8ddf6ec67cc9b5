"""Slow, not stuck: the straggler rule (each rank against its peers), its words, and why
the straggler is slow (clocks, power, host CPU).
"""
