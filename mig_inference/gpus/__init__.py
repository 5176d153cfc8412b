"""The MIG domain: GPU models and their profiles, layouts, mig-parted configs, and what a model
needs of a slice."""
