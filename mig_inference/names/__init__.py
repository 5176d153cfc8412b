"""The names the project gives and reads: label, taint and resource keys, Kubernetes names, and
content hashes for names that must change with their content."""
