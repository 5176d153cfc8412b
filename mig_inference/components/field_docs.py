"""Field docstrings where `help()` shows them: a TypedDict's field docstrings exist only in its
source (the SDK's schema analyzer reads them from there), so they are added to its `__doc__`."""

import ast
import inspect
import textwrap
import typing
from typing import Any

FIELDS_HEADING = "\n\n    Fields:\n"
"""Where the field list starts in a documented class's `__doc__` (the provider's schema leaves
it out: there each field has its own description)."""


def field_docstrings(cls: type) -> dict[str, str]:
    """Each annotated field of `cls` and the string literal right after it."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    [body] = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    found: dict[str, str] = {}
    for field, after in zip(body.body, body.body[1:], strict=False):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[field.target.id] = inspect.cleandoc(after.value.value)
    return found


def document_fields(namespace: dict[str, Any]) -> None:
    """Add the field list to the `__doc__` of every TypedDict defined in `namespace` (a
    module's globals)."""
    module = namespace["__name__"]
    for value in list(namespace.values()):
        if not (typing.is_typeddict(value) and value.__module__ == module):
            continue
        docs = field_docstrings(value)
        if not docs or FIELDS_HEADING in (value.__doc__ or ""):
            continue
        lines = [
            f"        {name}: " + doc.replace("\n", "\n            ") for name, doc in docs.items()
        ]
        value.__doc__ = (value.__doc__ or "").rstrip() + FIELDS_HEADING + "\n".join(lines)
