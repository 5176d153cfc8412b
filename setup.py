"""The wheel's packages, found in the tree rather than listed: `mig_inference` and every package
under it, and `components/` (kept at the top of the repository) with every package under it,
installed as `mig_inference.components` (pyproject.toml maps the folder). Everything else about
the package is in pyproject.toml."""

from setuptools import find_packages, setup

COMPONENTS = "mig_inference.components"

setup(
    packages=[
        *find_packages(include=["mig_inference", "mig_inference.*"]),
        COMPONENTS,
        *(f"{COMPONENTS}.{name}" for name in find_packages("components")),
    ],
)
