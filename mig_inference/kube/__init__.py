"""Kubernetes glue the components need: labels, the GPU Operator's values, the node Jobs and their
scripts, monitoring, engines."""
