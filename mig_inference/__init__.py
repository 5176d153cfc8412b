"""mig-inference's pure domain: MIG catalog, layouts, sizing, packing and the stack plan.

Nothing in the domain imports Pulumi, so it runs (and is tested) without the Pulumi engine; the
exceptions are `policy` (the policy pack's rules, on `pulumi_policy`) and, in an installed wheel,
`mig_inference.components` (the repository's `components/`).
"""
