"""The serving check after a rollout: what it covers (`targets`, from the plan) and the two
standard-library programs the cluster runs, `probe` (a verify Job per Service) and
`slice_check` (an init container in every verified replica)."""
