"""What composites raise: a definition that cannot be built against the catalog (`BuildError`, every
problem with its path), a workflow output that cannot be shaped, a Go template with no Jinja
translation, a client that cannot be asked. At run time the composite turns each into an
`isError` result (or a failed step of its run record)."""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.errors import ToolweaveError
from toolweave.problems import Problem, as_problems


class ElicitUnavailable(ToolweaveError):
    """The client cannot be asked (no elicitation capability, or no back channel)."""


class BuildError(ToolweaveError):
    """A definition that cannot be built against the current catalog; `issues` has every problem,
    paths relative to the definition."""

    def __init__(self, issues: Sequence[Problem | tuple[str, str]]) -> None:
        self.issues = as_problems(issues)
        super().__init__("; ".join(str(problem) for problem in self.issues))


class OutputError(ToolweaveError):
    """The output could not be built (a required value is missing, a value has the wrong type)."""


class GoTemplateError(ToolweaveError, ValueError):
    """A Go-template construct with no faithful Jinja translation."""
