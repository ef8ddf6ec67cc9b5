"""What NCCL and PyTorch can tell from inside a job: NCCL RAS, the flight recorder and
its analyzer, PyTorch's debug server. Asked and parsed here; judged in gputui.diagnose.nccl.ras.
"""
