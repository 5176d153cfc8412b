"""mig-inference: MIG layouts, plans and day-2 changes for inference fleets on shared GPUs.

The package is grouped by concern (README "Layout of the repository"). Nothing below `components`
imports Pulumi, so the domain runs (and is tested) without the Pulumi engine; the exceptions are
`components` (the Pulumi ComponentResources), `policy` (the policy pack's rules, on
`pulumi_policy`), and `render` and `ephemeral` (which load Pulumi only when called).
"""

import sys as _sys

# msgspec imports typing_extensions only for `get_type_hints`, `Required` and `NotRequired`, and
# falls back to `typing`'s: on Python 3.11 and later the same objects, and the same hints for the
# `include_extras=True` msgspec asks. typing_extensions imports `inspect` (ast, dis and tokenize
# with it), about a tenth of a `pack` or `plan` process (msgspec/msgspec#880 and #1090, open).
# Hidden while msgspec loads, it is left to whoever imports it later, who gets it as usual.
if "msgspec" not in _sys.modules and "typing_extensions" not in _sys.modules:
    _sys.modules["typing_extensions"] = None  # type: ignore[assignment]
    try:
        import msgspec as _msgspec  # noqa: F401
    finally:
        del _sys.modules["typing_extensions"]
