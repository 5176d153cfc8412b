"""The clusters and GPU node pools per cloud (GKE, EKS, OKE, existing nodes), their autoscalers,
and the Kubernetes provider that reaches the cluster."""
