"""A program's resources from a rendering (`mig_inference.rendering`: what the program registered
under mocks)."""

from __future__ import annotations

from mig_inference.rendering import Rendering
from mig_inference.rollout.resources import Program, Resource


def program_of(rendering: Rendering) -> Program:
    """Every resource the program registered, components first, then custom resources in the
    order they registered."""
    program = Program()
    for type_token, name in rendering.components:
        options = rendering.options.get((type_token, name))
        program.add(
            Resource(
                type_token,
                name,
                {},
                custom=False,
                parent=options.parent if options else None,
                dependencies=options.dependencies if options else (),
            )
        )
    for recorded in rendering.resources:
        options = rendering.options.get((recorded.type, recorded.name))
        program.add(
            Resource(
                recorded.type,
                recorded.name,
                recorded.inputs,
                parent=options.parent if options else None,
                dependencies=options.dependencies if options else (),
                protect=bool(options and options.protect),
                ignore_changes=options.ignore_changes if options else (),
                replace_on_changes=options.replace_on_changes if options else (),
                delete_before_replace=options.delete_before_replace if options else None,
                timeouts=options.custom_timeouts if options else None,
            )
        )
    return program
