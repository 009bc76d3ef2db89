"""A run stopped on purpose before its judge stages: the exception a run extension's stage raises (through a
subclass that names its outcome), which `ccrs run`, `ccrs evaluate`, `ccrs nightly` and the nightly gate read
without naming the extension.

A subclass says, once: `status`, the outcome's name (the night's `regression.status`, the gate's status),
`exit_code`, the commands' exit code, and `headline`, what the nightly alert says of it. The extension
declares the subclass in the run-extension registry (RunExtension.stops), so that the gate's table of
statuses lists it."""
from __future__ import annotations

from typing import ClassVar


class RunStopped(RuntimeError):
    """The run stopped before judging: the message is the one line to print; `run_id` the MLflow run that
    records it (None where the tracking store could not be reached); `where`, a line saying where its
    evidence is (its stage's folder), or ""."""

    status: ClassVar[str]
    exit_code: ClassVar[int]
    headline: ClassVar[str]

    def __init__(self, line: str, run_id: str | None = None, where: str = ""):
        super().__init__(line)
        self.run_id = run_id
        self.where = where
