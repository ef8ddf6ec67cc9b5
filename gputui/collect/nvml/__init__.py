"""What the driver says, through NVML: the bounded NVML thread and reader, the NVLink
counters read off the sampling path, health events, and the Xid catalogue.
"""
