"""mig-inference: MIG layouts, plans and day-2 changes for inference fleets on shared GPUs.

The package is grouped by concern (README "Layout of the repository"). Nothing below `components`
imports Pulumi, so the domain runs (and is tested) without the Pulumi engine; the exceptions are
`components` (the Pulumi ComponentResources), `policy` (the policy pack's rules, on
`pulumi_policy`), and `render` and `ephemeral` (which load Pulumi only when called).
"""

import sys as _sys
from _thread import get_ident as _thread_id


class _NoTypingExtensionsHere:
    """Finds no typing_extensions for the one thread that is importing msgspec; other threads
    import it as usual, and so does that one once msgspec is loaded.

    msgspec imports typing_extensions only for `get_type_hints`, `Required` and `NotRequired`,
    and falls back to `typing`'s: on Python 3.11 and later the same objects, and the same hints
    for the `include_extras=True` msgspec asks. typing_extensions imports `inspect` (ast, dis
    and tokenize with it), about a tenth of a `pack` or `plan` process (msgspec/msgspec#880 and
    #1090, open). Where typing_extensions is loaded already (Pulumi loads it) this changes
    nothing."""

    def __init__(self) -> None:
        self.thread = _thread_id()

    def find_spec(self, name: str, *_: object) -> None:
        if name == "typing_extensions" and _thread_id() == self.thread:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


if "msgspec" not in _sys.modules:
    _hiding = _NoTypingExtensionsHere()
    _sys.meta_path.insert(0, _hiding)
    try:
        import msgspec as _msgspec  # noqa: F401
    finally:
        _sys.meta_path.remove(_hiding)
        del _hiding
