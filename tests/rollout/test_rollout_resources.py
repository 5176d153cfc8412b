"""The simulator's view of one program: parents, descendants and what a step waits for."""

from __future__ import annotations

import random

import pytest

from mig_inference.rollout.resources import Key, Program, Resource


def tree(size: int, seed: int) -> Program:
    """Components and custom resources, each under an earlier component (or none), some
    depending on an earlier resource."""
    rng = random.Random(seed)
    program = Program()
    components: list[Key] = []
    keys: list[Key] = []
    for index in range(size):
        custom = index % 3 != 0
        parent = rng.choice(components) if components and rng.random() < 0.9 else None
        dependencies = (rng.choice(keys),) if keys and rng.random() < 0.3 else ()
        resource = Resource("t:m:C" if not custom else "t:m:R", f"r{index}", {}, custom, parent,
                            dependencies)  # fmt: skip
        program.add(resource)
        keys.append(resource.key)
        if not custom:
            components.append(resource.key)
    return program


def brute_descendants(program: Program, key: Key) -> list[Key]:
    return [r.key for r in program if key in program.ancestors(r.key)]


@pytest.mark.parametrize("seed", range(5))
def test_descendants_are_every_resource_under_a_key_in_registration_order(seed: int) -> None:
    program = tree(300, seed)
    keys = [r.key for r in program]
    # Re-registered under another parent: its old parent no longer counts it.
    moved = program[keys[-1]]
    program.add(Resource(moved.type, moved.name, {}, moved.custom, keys[0]))
    rebuilt = Program(dict(program.resources))
    for key in keys:
        assert program.descendants(key) == brute_descendants(program, key)
        assert rebuilt.descendants(key) == program.descendants(key)


def test_what_every_step_waits_for_costs_no_walk_of_the_whole_program(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`waits_for` of every resource of a program of 2,000 walks ancestors a bounded number of
    times per resource; walking every resource's ancestors for every dependency made a diff of
    1,000 services quadratic in its resources."""
    program = tree(2000, 1)
    walks = 0
    ancestors = Program.ancestors

    def counted(self: Program, key: Key) -> list[Key]:
        nonlocal walks
        walks += 1
        return ancestors(self, key)

    monkeypatch.setattr(Program, "ancestors", counted)
    for resource in program:
        program.waits_for(resource.key)
    assert walks <= 2 * len(program.resources)
