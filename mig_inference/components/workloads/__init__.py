"""What runs on the cluster: the GPU Operator, the gate and re-partitioning Jobs, monitoring, the
inference services, profiling, the serving check and the model cache."""
