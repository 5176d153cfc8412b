"""The rollout simulator: what a `pulumi up` from one version of a stack to the next does to a
running cluster, step by step, offline."""
