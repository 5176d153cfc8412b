"""Pulumi ComponentResources, one concern per module, thin over the pure `mig` domain."""
