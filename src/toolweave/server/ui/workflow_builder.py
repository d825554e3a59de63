"""The workflow builder's form: the parameters, then one block per step.

A step's fields are `s-<i>-id|type|tool|arguments|depends|condition|message|schema|collection|item|
on_error|retries|timeout`: a tool step calls `tool` with `arguments` (YAML/JSON; templates such as
`{{ params.topic }}` or `{{ steps.first.output }}`), an elicitation step asks `message` (answers shaped
by `schema`), a forEach step runs its tool once per item of `collection`. Keys the form has no field
for (defaultResults, onDecline, output...) ride in hidden `kept` fields, so switching between the form
and the text editor loses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolweave.composite.workflow.config import ERROR_ACTIONS, FAILURE_MODES, STEP_TYPES
from toolweave.problems import Problem
from toolweave.server.ui.builder_forms import (
    MAX_ROWS,
    FormKind,
    count_of,
    inline,
    kept_json,
    kept_of,
    names_list,
    place,
    plain,
    rest_of,
    scalar,
    slot_for,
    structured,
    text_of,
)
from toolweave.server.ui.documents import to_yaml
from toolweave.server.ui.errors import Unreadable

TOP_SLOTS = ("name", "description", "parameters", "timeout", "failureMode", "steps")
SHOWN = ("kind", "name", "description", "parameters", "timeout", "failureMode", "steps")
STEP_SHOWN = (
    "id",
    "type",
    "tool",
    "arguments",
    "dependsOn",
    "condition",
    "message",
    "schema",
    "collection",
    "itemVar",
    "onError",
    "timeout",
    "step",
)
STEP_FIELDS = (
    "id",
    "type",
    "tool",
    "arguments",
    "depends",
    "condition",
    "message",
    "schema",
    "collection",
    "item",
    "on_error",
    "retries",
    "timeout",
)
_SLOT_OF_KEY = {
    "id": "id",
    "type": "type",
    "tool": "tool",
    "arguments": "arguments",
    "dependsOn": "depends",
    "depends_on": "depends",
    "condition": "condition",
    "message": "message",
    "schema": "schema",
    "collection": "collection",
    "itemVar": "item",
    "item_var": "item",
    "onError": "on_error",
    "on_error": "on_error",
    "timeout": "timeout",
    "step": "tool",
}


@dataclass(slots=True)
class StepRow:
    id: str = ""
    type: str = "tool"
    tool: str = ""
    arguments: str = ""
    depends: str = ""
    """Step ids, comma separated."""
    condition: str = ""
    message: str = ""
    schema: str = ""
    collection: str = ""
    item: str = ""
    on_error: str = "abort"
    retries: str = ""
    timeout: str = ""
    kept: dict[str, Any] = field(default_factory=dict)

    @property
    def kept_text(self) -> str:
        return kept_json(self.kept)


@dataclass(slots=True)
class WorkflowForm:
    name: str = ""
    description: str = ""
    parameters: str = ""
    """The input schema as YAML/JSON (empty: no parameters)."""
    timeout: str = ""
    failure_mode: str = "abort"
    steps: list[StepRow] = field(default_factory=lambda: [StepRow(id="first")])
    kept: dict[str, Any] = field(default_factory=dict)

    @property
    def kept_text(self) -> str:
        return kept_json(self.kept)

    def slots(self) -> list[str]:
        found = list(TOP_SLOTS)
        for index in range(len(self.steps)):
            found += [f"s-{index}-{name}" for name in (*STEP_FIELDS, "row")]
        return found


def _step(posted: Any, i: int) -> StepRow:
    def get(name: str) -> str:
        return text_of(posted, f"s-{i}-{name}")

    return StepRow(
        id=get("id"),
        type=get("type") or "tool",
        tool=get("tool"),
        arguments=get("arguments"),
        depends=get("depends"),
        condition=get("condition"),
        message=get("message"),
        schema=get("schema"),
        collection=get("collection"),
        item=get("item"),
        on_error=get("on_error") or "abort",
        retries=get("retries"),
        timeout=get("timeout"),
        kept=kept_of(posted, f"s-{i}-kept"),
    )


def read(posted: Any) -> WorkflowForm:
    removed = text_of(posted, "remove")
    steps = [_step(posted, i) for i in range(count_of(posted, "steps")) if removed != f"s-{i}"]
    return WorkflowForm(
        name=text_of(posted, "name", 200),
        description=text_of(posted, "description"),
        parameters=text_of(posted, "parameters", 50_000),
        timeout=text_of(posted, "timeout"),
        failure_mode=text_of(posted, "failureMode") or "abort",
        steps=steps,
        kept=kept_of(posted, "kept"),
    )


def _loaded(text: str) -> Any:
    try:
        return structured(text, "the field")
    except Unreadable:
        return text  # the validator reports it at its field; field_problems says why


def _call(row: StepRow) -> dict[str, Any]:
    call: dict[str, Any] = {"tool": row.tool}
    if row.arguments:
        call["arguments"] = _loaded(row.arguments)
    return call


def _on_error(row: StepRow) -> dict[str, Any] | None:
    kept = row.kept.get("onError")
    on_error: dict[str, Any] = dict(kept) if isinstance(kept, Mapping) else {}
    on_error.pop("retryCount", None)
    on_error.pop("maxRetries", None)
    if row.on_error == "abort" and not row.retries and not on_error:
        return None
    on_error["action"] = row.on_error
    if row.retries:
        on_error["retryCount"] = scalar(row.retries)
    return on_error


def step_definition(row: StepRow) -> dict[str, Any]:
    """One step as the config file writes it; the fields of other step types are left out."""
    step: dict[str, Any] = {"id": row.id}
    if row.type != "tool":
        step["type"] = row.type
    if row.type == "forEach":
        step["collection"] = _loaded(row.collection) if row.collection.startswith("[") else row.collection
        if row.item:
            step["itemVar"] = row.item
        inner_kept = row.kept.get("step")
        step["step"] = {**(inner_kept if isinstance(inner_kept, Mapping) else {}), **_call(row)}
    elif row.type == "elicitation":
        step["message"] = row.message
        if row.schema:
            step["schema"] = _loaded(row.schema)
    else:
        step.update(_call(row))
    depends = names_list(row.depends)
    if depends:
        step["dependsOn"] = depends
    if row.condition:
        step["condition"] = (
            scalar(row.condition) if row.condition.lower() in ("true", "false") else row.condition
        )
    on_error = _on_error(row)
    if on_error:
        step["onError"] = on_error
    if row.timeout:
        step["timeout"] = scalar(row.timeout)
    return {**step, **rest_of(row.kept, ("step", "onError"))}


def to_definition(form: WorkflowForm) -> dict[str, Any]:
    definition: dict[str, Any] = {"kind": "workflow", "name": form.name, "description": form.description}
    if form.parameters:
        definition["parameters"] = _loaded(form.parameters)
    definition["steps"] = [step_definition(row) for row in form.steps]
    if form.timeout:
        definition["timeout"] = scalar(form.timeout)
    if form.failure_mode != "abort":
        definition["failureMode"] = form.failure_mode
    return {**definition, **form.kept}


def _block(value: Any) -> str:
    """A schema as indented YAML for a multi-line box."""
    if value is None:
        return ""
    return to_yaml(value) if isinstance(value, dict | list) else plain(value)


def _mapping_at(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def step_row(step: Mapping[str, Any]) -> StepRow:
    kind = plain(step.get("type")) or (
        "forEach"
        if "collection" in step
        else "elicitation"
        if "message" in step and "tool" not in step
        else "tool"
    )
    inner = _mapping_at(step, "step")
    call = inner if kind == "forEach" else step
    on_error = _mapping_at(step, "onError")
    retries = on_error.get("retryCount", on_error.get("maxRetries"))
    kept = rest_of(step, STEP_SHOWN)
    if inner and kind == "forEach":
        kept["step"] = rest_of(inner, ("tool", "arguments"))
    if set(on_error) - {"action", "retryCount", "maxRetries"}:
        kept["onError"] = rest_of(on_error, ("action", "retryCount", "maxRetries"))
    collection = step.get("collection")
    return StepRow(
        id=plain(step.get("id")),
        type=kind,
        tool=plain(call.get("tool")),
        arguments=inline(call.get("arguments") or None),
        depends=", ".join(plain(d) for d in step.get("dependsOn") or step.get("depends_on") or []),
        condition=plain(step.get("condition")).lower()
        if isinstance(step.get("condition"), bool)
        else plain(step.get("condition")),
        message=plain(step.get("message")),
        schema=inline(step.get("schema")),
        collection=inline(collection) if isinstance(collection, list) else plain(collection),
        item=plain(step.get("itemVar")),
        on_error=plain(on_error.get("action")) or "abort",
        retries=plain(retries),
        timeout=plain(step.get("timeout")),
        kept={key: value for key, value in kept.items() if value not in ({}, None)},
    )


def from_definition(definition: Mapping[str, Any]) -> WorkflowForm:
    steps = [step_row(step) for step in definition.get("steps") or [] if isinstance(step, Mapping)]
    return WorkflowForm(
        name=plain(definition.get("name")),
        description=plain(definition.get("description")),
        parameters=_block(definition.get("parameters")),
        timeout=plain(definition.get("timeout")),
        failure_mode=plain(definition.get("failureMode")) or "abort",
        steps=steps or [StepRow(id="first")],
        kept=rest_of(definition, SHOWN),
    )


def slot_of(problem: Problem) -> str | None:
    return slot_for(problem.path, {"steps": ("s", _SLOT_OF_KEY)}, TOP_SLOTS)


def field_problems(form: WorkflowForm) -> list[Problem]:
    found = []
    boxes = [("parameters", form.parameters, dict)]
    for index, row in enumerate(form.steps):
        boxes.append((f"steps[{index}].arguments", row.arguments, dict))
        boxes.append((f"steps[{index}].schema", row.schema, dict))
    for path, text, expected in boxes:
        try:
            value = structured(text, "this")
        except Unreadable as error:
            found.append(Problem(path, str(error)))
            continue
        if value is not None and not isinstance(value, expected):
            found.append(Problem(path, "must be a mapping such as {query: x}"))
    return found


def add_row(form: WorkflowForm, action: str, tool: str) -> bool:
    if action not in ("add_step", "pick"):
        return False
    if len(form.steps) < MAX_ROWS:
        if action == "pick" and len(form.steps) == 1 and not form.steps[0].tool:
            form.steps[0].tool = tool
        else:
            last = form.steps[-1].id if form.steps else ""
            form.steps.append(StepRow(id=f"step{len(form.steps) + 1}", tool=tool, depends=last))
    return True


WORKFLOW = FormKind(
    kind="workflow",
    title="workflow",
    intro=(
        "A workflow is one tool that runs several steps: tool calls, questions to the user (elicitation) "
        "and loops (forEach), each after the steps it depends on, with the results of earlier steps "
        "available to later ones as {{ steps.<id>.output }}."
    ),
    fields_template="_fields_workflow.html",
    read=read,
    to_definition=to_definition,
    from_definition=from_definition,
    place=lambda problems, form: place(problems, form, slot_of),
    add_row=add_row,
    field_problems=field_problems,
    row_tools=lambda form: [(f"s-{i}-params", row.tool) for i, row in enumerate(form.steps)],
    choices={"step_types": STEP_TYPES, "error_actions": ERROR_ACTIONS, "failure_modes": FAILURE_MODES},
)
