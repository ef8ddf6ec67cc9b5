"""The whole-world probe across hosts: launch, rendezvous, barrier and all_reduce, parsing
the workers' lines, bisecting to the bad host or pair, reaping what is left.
"""
