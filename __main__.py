"""The Pulumi program of this repository's stacks (`stacks/Pulumi.<stack>.yaml`)."""

from components.program import stack_program

stack_program()
