"""Models the Hugging Face Hub hands out only to accounts that accepted their terms (gated
repositories): a replica, profiling run or cache fill that downloads one without a token is
refused by the Hub (401), and the pod fails at start. The plan names such a service before
anything is created.

Gating is set per repository by its owner and can change; this table holds the owners that gate
every model they publish (or a family of them), each with its source. A repository it does not
list may be gated too: only the Hub says so."""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import Struct

from mig_inference.plan.model import ServicePlan
from mig_inference.spec.model import Engine

HUB_ENGINES = frozenset({Engine.VLLM, Engine.TGI})
"""Engines that read `model` as a Hub repository and download it (Triton reads a model
repository; a custom image does what it does)."""


class GatedRepositories(Struct, frozen=True):
    """Hub repositories gated by their owner: every repository whose id starts with
    `prefix`."""

    prefix: str
    """The start of the repository id (`owner/` or `owner/family`)."""
    terms: str
    """What a user accepts on the model's page before the Hub serves its files."""
    source: str
    """Where the gating is stated."""


GATED = (
    GatedRepositories(
        "meta-llama/",
        "the Llama community licence",
        "each meta-llama model page on huggingface.co: 'You need to agree to share your contact "
        "information to access this model' above the licence",
    ),
    GatedRepositories(
        "mistralai/",
        "Mistral AI's terms and privacy notice",
        "the mistralai model cards' `extra_gated_description` / `extra_gated_prompt` metadata "
        "(e.g. Mistral-Nemo-Instruct-2407, Mistral-Large-Instruct-2411)",
    ),
)


def gated(model: str) -> GatedRepositories | None:
    """The gated family `model` (a Hub repository id) belongs to, if this table lists it."""
    return next((g for g in GATED if model.startswith(g.prefix)), None)


def gated_without_token(services: Sequence[ServicePlan]) -> list[str]:
    """One warning per service that downloads a gated model from the Hub without naming a
    token (`hfTokenSecret`)."""
    warnings = []
    for name in dict.fromkeys(s.spec.name for s in services):
        spec = next(s.spec for s in services if s.spec.name == name)
        family = gated(spec.model)
        if spec.engine in HUB_ENGINES and spec.hf_token_secret is None and family is not None:
            warnings.append(
                f"service {name}: {spec.model} is gated on the Hugging Face Hub (it serves the "
                f"files only to an account that accepted {family.terms}) and the service names "
                "no hfTokenSecret: its pods' download would be refused; name a secret config key "
                "holding such an account's token"
            )
    return warnings
