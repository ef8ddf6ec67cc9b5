"""Fan-out to many hosts or pods (ssh, srun, pdsh, kubectl), bounded, and merged."""
