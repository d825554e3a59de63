"""The fan-out builder's form: targets picked from the catalog, the strategy and its settings.

Fields: `name`, `description`, `strategy`, `order`, `timeout`, and per target `t-<i>-tool|arguments|
timeout`. Keys the form has no field for (title, annotations, tags, an explicit input schema...) ride
in the hidden `kept` field, so switching between the form and the text editor loses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolweave.composite.fanout.config import FanoutDef
from toolweave.problems import Problem
from toolweave.server.ui.builder_forms import (
    MAX_ROWS,
    FormKind,
    count_of,
    inline,
    kept_json,
    kept_of,
    place,
    plain,
    rest_of,
    scalar,
    slot_for,
    structured,
    text_of,
)
from toolweave.server.ui.errors import Unreadable

STRATEGIES = tuple(FanoutDef.model_fields["strategy"].annotation.__args__)  # type: ignore[union-attr]
ORDERS = tuple(FanoutDef.model_fields["order"].annotation.__args__)  # type: ignore[union-attr]
TOP_SLOTS = ("name", "description", "strategy", "order", "timeout", "targets", "tools")
SHOWN = ("kind", "name", "description", "strategy", "order", "timeout", "targets", "tools")
_TARGET_FIELDS = {"tool": "tool", "arguments": "arguments", "timeout": "timeout"}


@dataclass(slots=True)
class TargetRow:
    tool: str = ""
    arguments: str = ""
    """YAML/JSON mapping; empty forwards the call's own arguments."""
    timeout: str = ""


@dataclass(slots=True)
class FanoutForm:
    name: str = ""
    description: str = ""
    strategy: str = "parallel"
    order: str = "completion"
    timeout: str = ""
    targets: list[TargetRow] = field(default_factory=lambda: [TargetRow()])
    kept: dict[str, Any] = field(default_factory=dict)

    @property
    def kept_text(self) -> str:
        return kept_json(self.kept)

    def slots(self) -> list[str]:
        found = list(TOP_SLOTS)
        for index in range(len(self.targets)):
            found += [f"t-{index}-{name}" for name in ("tool", "arguments", "timeout", "row")]
        return found


def read(posted: Any) -> FanoutForm:
    removed = text_of(posted, "remove")
    targets = [
        TargetRow(
            tool=text_of(posted, f"t-{i}-tool"),
            arguments=text_of(posted, f"t-{i}-arguments"),
            timeout=text_of(posted, f"t-{i}-timeout"),
        )
        for i in range(count_of(posted, "targets"))
        if removed != f"t-{i}"
    ]
    return FanoutForm(
        name=text_of(posted, "name", 200),
        description=text_of(posted, "description"),
        strategy=text_of(posted, "strategy") or "parallel",
        order=text_of(posted, "order") or "completion",
        timeout=text_of(posted, "timeout"),
        targets=targets,
        kept=kept_of(posted, "kept"),
    )


def _arguments(text: str) -> Any:
    try:
        return structured(text, "arguments")
    except Unreadable:
        return text  # the validator reports it at the field, and field_problems says why


def to_definition(form: FanoutForm) -> dict[str, Any]:
    """`tools: [...]` while every target is just a tool, else `targets` with arguments and timeouts."""
    definition: dict[str, Any] = {"kind": "fanout", "name": form.name, "description": form.description}
    plain_tools = all(not row.arguments and not row.timeout for row in form.targets)
    if plain_tools:
        definition["tools"] = [row.tool for row in form.targets]
    else:
        targets = []
        for row in form.targets:
            target: dict[str, Any] = {"tool": row.tool}
            if row.arguments:
                target["arguments"] = _arguments(row.arguments)
            if row.timeout:
                target["timeout"] = scalar(row.timeout)
            targets.append(target)
        definition["targets"] = targets
    definition["strategy"] = form.strategy
    definition["order"] = form.order
    if form.timeout:
        definition["timeout"] = scalar(form.timeout)
    return {**definition, **form.kept}


def from_definition(definition: Mapping[str, Any]) -> FanoutForm:
    rows: list[TargetRow] = []
    for tool in definition.get("tools") or []:
        rows.append(TargetRow(tool=plain(tool)))
    for target in definition.get("targets") or []:
        if isinstance(target, Mapping):
            rows.append(
                TargetRow(
                    tool=plain(target.get("tool")),
                    arguments=inline(target.get("arguments")),
                    timeout=plain(target.get("timeout")),
                )
            )
    return FanoutForm(
        name=plain(definition.get("name")),
        description=plain(definition.get("description")),
        strategy=plain(definition.get("strategy")) or "parallel",
        order=plain(definition.get("order")) or "completion",
        timeout=plain(definition.get("timeout")),
        targets=rows or [TargetRow()],
        kept=rest_of(definition, SHOWN),
    )


def slot_of(problem: Problem) -> str | None:
    return slot_for(problem.path, {"targets": ("t", _TARGET_FIELDS), "tools": ("t", {"": "tool"})}, TOP_SLOTS)


def field_problems(form: FanoutForm) -> list[Problem]:
    found = []
    for index, row in enumerate(form.targets):
        try:
            value = structured(row.arguments, "the arguments")
        except Unreadable as error:
            found.append(Problem(f"targets[{index}].arguments", str(error)))
            continue
        if value is not None and not isinstance(value, dict):
            found.append(Problem(f"targets[{index}].arguments", "must be a mapping such as {query: x}"))
    return found


def add_row(form: FanoutForm, action: str, tool: str) -> bool:
    if len(form.targets) >= MAX_ROWS or action not in ("add_target", "pick"):
        return action in ("add_target", "pick")
    if action == "pick" and len(form.targets) == 1 and not form.targets[0].tool:
        form.targets[0].tool = tool  # the empty first row takes the first pick
    else:
        form.targets.append(TargetRow(tool=tool))
    return True


FANOUT = FormKind(
    kind="fanout",
    title="fan-out",
    intro="A fan-out is one tool that calls several tools with the same request and returns every answer.",
    fields_template="_fields_fanout.html",
    read=read,
    to_definition=to_definition,
    from_definition=from_definition,
    place=lambda problems, form: place(problems, form, slot_of),
    add_row=add_row,
    field_problems=field_problems,
    row_tools=lambda form: [(f"t-{i}-params", row.tool) for i, row in enumerate(form.targets)],
    choices={"strategies": STRATEGIES, "orders": ORDERS},
)
