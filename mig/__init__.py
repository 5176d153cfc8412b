"""`python -m mig` from a clone of this repository: the command line lives in `mig_inference`."""
