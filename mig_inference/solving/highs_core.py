"""HiGHS's compiled core, `highspy._core`, loaded without the highspy package's Python layer.

`import highspy` runs `highspy/__init__.py`, whose `highs` module imports numpy: about 60% of a
`pack` process's start-up, for a solver that never needs it. The core is a self-contained
extension module (pybind11 over HiGHS's C++ `Highs` class): it is found where the installed
highspy package keeps it and loaded with importlib's own extension loader, under its own name,
so a later `import highspy` (by a user's code in the same process) reuses this very module, as
it would have loaded it itself.

What stays numpy-free is the caller's part: in highspy 1.16 every core call that takes an
array (`addRow`, `addCols`, `setSolution` with indexes, the `HighsLp.col_cost_` property)
converts through numpy and so imports it; lists of the other `HighsLp`/`HighsSolution` fields
and scalar calls do not (see `milp`).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from functools import cache
from types import ModuleType

CORE = "highspy._core"


@cache
def highs_core() -> ModuleType:
    """The `highspy._core` module: the one already imported, else loaded from the highspy
    package's folder without running the package's `__init__`."""
    loaded = sys.modules.get(CORE)
    if loaded is not None:
        return loaded
    # A top-level package's spec is found without importing it.
    package = importlib.util.find_spec("highspy")
    if package is None or not package.submodule_search_locations:
        raise ModuleNotFoundError("highspy is not installed (the planner solves with HiGHS)")
    extension = (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    for folder in package.submodule_search_locations:
        spec = importlib.machinery.FileFinder(folder, extension).find_spec(CORE)
        if spec is not None and spec.loader is not None and spec.origin is not None:
            break
    else:
        raise ModuleNotFoundError(f"{CORE}: no compiled HiGHS core in the highspy package")
    module = importlib.util.module_from_spec(spec)
    sys.modules[CORE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[CORE]
        raise
    return module
