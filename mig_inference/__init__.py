"""mig-inference's pure domain: MIG catalog, layouts, sizing, packing and the stack plan.

Nothing in this package imports Pulumi, so it runs (and is tested) without the Pulumi engine.
"""
