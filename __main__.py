"""The Pulumi program of this repository's stacks (`stacks/Pulumi.<stack>.yaml`)."""

from mig_inference.components.program import stack_program

stack_program()
