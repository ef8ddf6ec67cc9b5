"""GPU health, judged: one word per GPU, NVLink and PCIe error rates, what the verdict
blames, and the blamed GPU's probe result.
"""
