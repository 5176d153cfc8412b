"""The only part of `ephemeral` that runs other programs: the Pulumi CLI, through Pulumi's
Automation API (`pulumi.automation`, a LocalWorkspace on the project directory, the same
`Pulumi.yaml` and stack files `pulumi up` reads), and kubectl for the verify Jobs' logs."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pulumi.automation as auto
from msgspec import Struct

from mig_inference.ephemeral.report import VerifyJob
from mig_inference.errors import MigError

Progress = Callable[[str], None]


class Outcome(Struct, frozen=True):
    ok: bool
    output: str
    """What the command printed (and, when it failed, the error the Automation API raised)."""


class Stacks:
    """The project's stacks, through the Automation API."""

    def __init__(self, project_dir: Path, progress: Progress) -> None:
        if not (project_dir / "Pulumi.yaml").is_file():
            raise MigError(
                "is not a Pulumi project directory (no Pulumi.yaml): run from the project, or "
                "give --project-dir",
                str(project_dir),
            )
        try:
            self.workspace = auto.LocalWorkspace(work_dir=str(project_dir))
        except FileNotFoundError:
            raise MigError(
                "the Pulumi CLI is not on PATH: install it (https://www.pulumi.com/docs/install/)",
                "pulumi",
            ) from None
        self.progress = progress

    def find(self, name: str) -> auto.Stack | None:
        try:
            return auto.Stack.select(name, self.workspace)
        except auto.StackNotFoundError:
            return None

    def create(self, name: str) -> auto.Stack:
        return auto.Stack.create(name, self.workspace)

    def names(self) -> list[str]:
        return [summary.name for summary in self.workspace.list_stacks()]

    def tags(self, name: str) -> dict[str, str]:
        return dict(self.workspace.list_tags(name))

    def set_tags(self, name: str, tags: Mapping[str, str]) -> None:
        for key, value in tags.items():
            self.workspace.set_tag(name, key, value)

    def _run(self, action: Callable[[Progress], object]) -> Outcome:
        lines: list[str] = []

        def show(line: str) -> None:
            lines.append(line)
            self.progress(line)

        try:
            action(show)
        except auto.CommandError as error:
            return Outcome(False, "\n".join([*lines, str(error)]))
        return Outcome(True, "\n".join(lines))

    def up(
        self,
        stack: auto.Stack,
        message: str,
        targets: Sequence[str] = (),
    ) -> Outcome:
        """`pulumi up`; with `targets`, only those resources, replaced (a Job runs again)."""
        chosen = list(targets) or None
        return self._run(
            lambda show: stack.up(
                on_output=show,
                on_error=show,
                color="never",
                message=message,
                target=chosen,
                replace=chosen,
            )
        )

    def destroy(self, stack: auto.Stack, message: str) -> Outcome:
        """`pulumi destroy`, then the stack itself goes (its stack file stays)."""
        outcome = self._run(
            lambda show: stack.destroy(
                on_output=show, on_error=show, color="never", message=message
            )
        )
        if outcome.ok:
            self.workspace.remove_stack(stack.name, preserve_config=True)
        return outcome

    def state(self, stack: auto.Stack) -> dict[str, Any]:
        """The stack's resources as `pulumi stack export` gives them (its `deployment`)."""
        deployment = stack.export_stack().deployment
        return deployment if isinstance(deployment, dict) else {}

    def kubeconfig(self, stack: auto.Stack) -> str | None:
        """The kubeconfig a stack that created its cluster exports (a secret), else None."""
        output = stack.outputs().get("kubeconfig")
        value = output.value if output is not None else None
        return value if isinstance(value, str) and value else None


def job_logs(jobs: Sequence[VerifyJob], kubeconfig: str | None) -> dict[str, str]:
    """Each verify Job's log (`kubectl logs`), or `not read: <why>`."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return {job.name: "not read: kubectl is not on PATH" for job in jobs}
    if kubeconfig is None:
        return {
            job.name: "not read: the stack exports no kubeconfig (it joins its cluster); read it "
            f"with kubectl logs -n {job.namespace} job/{job.name}"
            for job in jobs
        }
    logs = {}
    with tempfile.TemporaryDirectory(prefix="mig-inference-") as directory:
        path = Path(directory) / "kubeconfig"
        # The kubeconfig is a secret: only this user may read the file, which goes with the
        # directory.
        path.touch(mode=0o600)
        path.write_text(kubeconfig, encoding="utf-8")
        for job in jobs:
            run = subprocess.run(
                [kubectl, "--kubeconfig", str(path), "logs", "-n", job.namespace,
                 f"job/{job.name}", "--tail=200"],
                capture_output=True, text=True, timeout=120, check=False,
                env={**os.environ, "KUBECONFIG": str(path)},
            )  # fmt: skip
            logs[job.name] = (
                run.stdout
                if run.returncode == 0
                else f"not read: kubectl logs exited {run.returncode}: {run.stderr.strip()}"
            )
    return logs
