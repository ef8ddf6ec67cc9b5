"""What NCCL RAS, the flight recorder and PyTorch's debug server say, as ranked findings."""
