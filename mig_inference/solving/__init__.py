"""The solvers: packing a fleet onto GPUs, sizing from throughput, the cheapest machine type, and
the planner's benchmark."""
