"""mig-inference: MIG layouts, plans and day-2 changes for inference fleets on shared GPUs.

The package is grouped by concern (README "Layout of the repository"). Nothing below `components`
imports Pulumi, so the domain runs (and is tested) without the Pulumi engine; the exceptions are
`components` (the Pulumi ComponentResources), `policy` (the policy pack's rules, on
`pulumi_policy`), and `render` and `ephemeral` (which load Pulumi only when called).
"""
