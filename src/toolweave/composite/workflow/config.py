"""Workflow definitions (docs/workflows.md): a DAG of steps with templates, retries, elicitation, forEach and output.

Keys are camelCase as in ToolHive (`dependsOn`, `onError`, ...); the
snake_case spellings are accepted too, so ToolHive's internal config form
loads unchanged. The model itself only checks shapes and types; everything
that needs the whole definition (references, cycles, skippable outputs,
template syntax) is checked by `validation.workflow_problems`, which reports
every problem at once.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field

from toolweave.composite.definition import CompositeBase, ToolReference
from toolweave.fields import Duration, StrictModel

STEP_TYPES = ("tool", "elicitation", "forEach")
ERROR_ACTIONS = ("abort", "continue", "retry")
ELICIT_ACTIONS = ("abort", "continue", "skip_remaining")
FAILURE_MODES = ("abort", "continue")
OUTPUT_TYPES = ("string", "integer", "number", "boolean", "object", "array")
CONTEXT_NAMES = frozenset({"params", "steps", "workflow"})
FOREACH_NAMES = frozenset({"index", "forEach"})
RESERVED_ITEM_VARS = CONTEXT_NAMES | FOREACH_NAMES

DEFAULT_WORKFLOW_TIMEOUT = 30 * 60.0
DEFAULT_STEP_TIMEOUT = 5 * 60.0
DEFAULT_MAX_PARALLEL = 10
DEFAULT_MAX_ITERATIONS = 100
MAX_ITERATIONS = 1000
MAX_PARALLEL = 50
MAX_RETRIES = 10
MAX_OUTPUT_DEPTH = 10


def _action_of(value: Any) -> Any:
    """ToolHive writes `onDecline: {action: skip_remaining}`; the short form is the bare action."""
    if isinstance(value, dict) and set(value) == {"action"}:
        return value["action"]
    return value


ElicitAction = Annotated[str | None, BeforeValidator(_action_of)]


class OnErrorDef(StrictModel):
    """What a failed step does: stop the workflow, carry on with `defaultResults`, or retry."""

    action: str = "abort"
    retry_count: int | None = Field(default=None, alias="retryCount", ge=0)
    max_retries: int | None = Field(default=None, alias="maxRetries", ge=0)
    """Seed 003's spelling of `retryCount`."""
    retry_delay: Duration = Field(default=1.0, alias="retryDelay")
    """Delay before the first retry; it doubles on each further one."""
    max_retry_delay: Duration | None = Field(default=None, alias="maxRetryDelay")
    """Cap of the backoff; 60 x `retryDelay` when absent (as ToolHive)."""

    @property
    def retries(self) -> int:
        if self.action != "retry":
            return 0
        return self.retry_count if self.retry_count is not None else self.max_retries or 0

    @property
    def delay_cap(self) -> float:
        return self.max_retry_delay if self.max_retry_delay is not None else 60 * self.retry_delay


class StepDef(StrictModel):
    """One step. Which fields apply depends on `type` (tool, elicitation or forEach)."""

    id: str = ""
    """Required on workflow steps; optional on the inner step of a forEach."""
    type: str | None = None
    """tool (default), elicitation or forEach; inferred from `message` / `collection` when absent."""
    tool: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list, alias="dependsOn")
    condition: str | bool | None = None
    on_error: OnErrorDef | None = Field(default=None, alias="onError")
    timeout: Duration | None = None
    default_results: dict[str, Any] | None = Field(default=None, alias="defaultResults")
    description: str | None = None
    # elicitation
    message: str | None = None
    request_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    on_decline: ElicitAction = Field(default=None, alias="onDecline")
    on_cancel: ElicitAction = Field(default=None, alias="onCancel")
    default_response: Any = Field(default=None, alias="defaultResponse")
    # forEach
    collection: str | list[Any] | None = None
    item_var: str = Field(default="item", alias="itemVar")
    max_parallel: int | None = Field(default=None, alias="maxParallel")
    max_iterations: int = Field(default=DEFAULT_MAX_ITERATIONS, alias="maxIterations")
    step: StepDef | None = None
    """The inner tool step a forEach runs once per item."""

    @property
    def kind(self) -> str:
        """The effective type: `type`, else inferred from the fields given."""
        if self.type:
            return self.type
        if self.message is not None and self.tool is None:
            return "elicitation"
        if self.collection is not None and self.tool is None:
            return "forEach"
        return "tool"

    @property
    def has_default_response(self) -> bool:
        return "default_response" in self.model_fields_set

    @property
    def action(self) -> str:
        return self.on_error.action if self.on_error else "abort"

    @property
    def may_be_skipped(self) -> bool:
        """ToolHive's rule: a step with a condition, or one that may fail with `continue`."""
        return bool(self.condition not in (None, "", True)) or self.action == "continue"


class OutputPropertyDef(StrictModel):
    type: str
    description: str | None = None
    value: Any = None
    """A template (or a literal) giving the value; required unless nested `properties` build it."""
    properties: dict[str, OutputPropertyDef] | None = None
    items: dict[str, Any] | None = None
    """JSON Schema of array items, for the advertised outputSchema."""
    default: Any = None
    required: list[str] = Field(default_factory=list)

    @property
    def has_default(self) -> bool:
        return "default" in self.model_fields_set

    @property
    def has_value(self) -> bool:
        return self.value not in (None, "")


class OutputDef(StrictModel):
    type: str = "object"
    description: str | None = None
    properties: dict[str, OutputPropertyDef] = Field(default_factory=dict)
    required: list[str] = Field(default_factory=list)


class WorkflowDef(CompositeBase):
    kind: Literal["workflow"] = "workflow"
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    steps: list[StepDef] = Field(default_factory=list)
    timeout: Duration = DEFAULT_WORKFLOW_TIMEOUT
    failure_mode: str = Field(default="abort", alias="failureMode")
    max_parallel: int = Field(default=DEFAULT_MAX_PARALLEL, alias="maxParallel", ge=1, le=MAX_PARALLEL)
    output: OutputDef | None = None

    max_steps: ClassVar[int] = 200
    """Step limit per workflow (resource bound; ToolHive uses 100)."""

    def tool_references(self) -> list[ToolReference]:
        found = []
        for index, step in enumerate(self.steps):
            if step.tool:
                found.append(ToolReference(f"steps[{index}].tool", step.tool))
            if step.step is not None and step.step.tool:
                found.append(ToolReference(f"steps[{index}].step.tool", step.step.tool))
        return found


__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "DEFAULT_MAX_PARALLEL",
    "DEFAULT_STEP_TIMEOUT",
    "DEFAULT_WORKFLOW_TIMEOUT",
    "OnErrorDef",
    "OutputDef",
    "OutputPropertyDef",
    "StepDef",
    "WorkflowDef",
]
