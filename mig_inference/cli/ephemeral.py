"""`ephemeral`: an ephemeral test stack brought up within its budget and TTL, verified, destroyed
(the driver is `mig_inference.ephemeral`)."""

from __future__ import annotations

import argparse

from mig_inference.cli.common import Verb


def register(verb: Verb) -> None:
    from mig_inference.ephemeral.command import add_arguments

    sub = verb(
        "ephemeral",
        _ephemeral,
        "an ephemeral test stack: up within its budget and TTL, verify its services, destroy",
    )
    add_arguments(sub)


def _ephemeral(args: argparse.Namespace) -> int:
    from mig_inference.ephemeral.command import run

    return run(args)
