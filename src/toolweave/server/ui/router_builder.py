"""The router builder: its form read into a definition (the same document as the config file and the
REST API), a definition written back into the form, YAML both ways, and each problem put at its field.

The form is flat: `op-<i>-slug|tool|mapping` for operations (once the tool is known, `mapping`
holds only the pairs its table has no row for and `op-<i>-map-<parameter>` is one row each),
`rule-<i>-type|field|value|case|priority|operation` for rules, plus `name`, `description`,
`routing`, `default_operation`.
A problem's path (`definition.rules[0].condition.type`) names its field's slot (`rule-0-type`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolweave.common_types import object_at
from toolweave.composite.router.config import CONDITION_TYPES, GROUP_TYPES
from toolweave.problems import Problem
from toolweave.server.ui.builder_forms import (
    MAX_ROWS,
    FormKind,
    count_of,
    inline,
    kept_json,
    kept_of,
    rest_of,
    scalar,
    structured,
    text_of,
)
from toolweave.server.ui.builder_forms import (
    place as place_at,
)
from toolweave.server.ui.errors import Unreadable

ROUTINGS = ("rule_based", "agent_driven")
TOP_SLOTS = ("name", "description", "routing", "default_operation", "operations", "rules")
SHOWN = ("kind", *TOP_SLOTS)
_OP_FIELDS = {"slug": "slug", "tool": "tool", "parameter_mapping": "mapping"}
_RULE_CONDITION = {
    "type": "type",
    "field": "field",
    "value": "value",
    "case_sensitive": "case",
    "caseSensitive": "case",
}
_PATH = re.compile(r"^(operations|rules)\[(\d+)\](?:\.(.*))?$")


@dataclass(slots=True)
class OperationRow:
    slug: str = ""
    tool: str = ""
    mapping: str = ""
    """`argument=tool_parameter` pairs separated by commas."""
    table_tool: str = ""
    """The tool the mapping cell was drawn for."""
    table_shown: bool = False
    """Whether that cell shows the table (else the text field, the tool's parameters being unknown)."""
    kept: dict[str, Any] = field(default_factory=dict)
    """The operation's keys without a field (display_name, description, fixed arguments)."""

    @property
    def kept_text(self) -> str:
        return kept_json(self.kept)

    def table(self, params: list[Any]) -> tuple[dict[str, str], str]:
        return mapping_table(self, params)


@dataclass(slots=True)
class RuleRow:
    type: str = "contains"
    field: str = ""
    value: str = ""
    """The compared value; for `all`/`any` the list of conditions and for `not` the condition, as YAML."""
    case: bool = False
    priority: str = ""
    operation: str = ""


@dataclass(slots=True)
class RouterForm:
    name: str = ""
    description: str = ""
    routing: str = "rule_based"
    default_operation: str = ""
    operations: list[OperationRow] = field(default_factory=lambda: [OperationRow()])
    rules: list[RuleRow] = field(default_factory=list)
    kept: dict[str, Any] = field(default_factory=dict)
    """The router's keys without a field (title, annotations, tags, input_schema, templates...)."""

    @property
    def kept_text(self) -> str:
        return kept_json(self.kept)

    def unified(self, params: dict[str, list[Any]]) -> list[str]:
        return unified_names(self, params)

    def slots(self) -> list[str]:
        """Every field a problem can be shown at."""
        found = list(TOP_SLOTS)
        for index in range(len(self.operations)):
            found += [f"op-{index}-{name}" for name in ("slug", "tool", "mapping", "row")]
        for index in range(len(self.rules)):
            found += [
                f"rule-{index}-{name}"
                for name in ("type", "field", "value", "case", "priority", "operation", "row")
            ]
        return found


def read_form(form: Any) -> RouterForm:
    """The builder's fields as they were sent (rows removed with their ✕ are left out)."""
    removed = text_of(form, "remove")
    operations = [
        OperationRow(
            slug=text_of(form, f"op-{i}-slug"),
            tool=text_of(form, f"op-{i}-tool"),
            mapping=_posted_mapping(form, i),
            table_tool=text_of(form, f"op-{i}-maptool"),
            table_shown=bool(text_of(form, f"op-{i}-mapparams")),
            kept=kept_of(form, f"op-{i}-kept"),
        )
        for i in range(count_of(form, "ops"))
        if removed != f"op-{i}"
    ]
    rules = [
        RuleRow(
            type=text_of(form, f"rule-{i}-type") or "contains",
            field=text_of(form, f"rule-{i}-field"),
            value=text_of(form, f"rule-{i}-value"),
            case=form.get(f"rule-{i}-case") == "true",
            priority=text_of(form, f"rule-{i}-priority"),
            operation=text_of(form, f"rule-{i}-operation"),
        )
        for i in range(count_of(form, "rules"))
        if removed != f"rule-{i}"
    ]
    return RouterForm(
        name=text_of(form, "name", 200),
        description=text_of(form, "description"),
        routing=text_of(form, "routing") or "rule_based",
        default_operation=text_of(form, "default_operation"),
        operations=operations,
        rules=rules,
        kept=kept_of(form, "kept"),
    )


def _posted_mapping(form: Any, index: int) -> str:
    """The operation's mapping as `arg=param` text: the table's rows (each tool parameter and the
    unified argument feeding it; empty or the same name means no renaming) plus the pairs the table
    has no row for, which it carries in a hidden field."""
    text = text_of(form, f"op-{index}-mapping")
    shown = [name for name in text_of(form, f"op-{index}-mapparams").split(",") if name][:MAX_ROWS]
    if not shown:
        return text
    pairs = {arg: param for arg, param in _mapping(text).items() if param not in shown}
    for param in shown:
        arg = text_of(form, f"op-{index}-map-{param}")
        if arg and arg != param:
            pairs[arg] = param
    return ", ".join(f"{arg}={param}" for arg, param in pairs.items())


def mapping_table(row: OperationRow, params: list[Any]) -> tuple[dict[str, str], str]:
    """({tool parameter: the unified argument feeding it}, the pairs for parameters the tool lacks)."""
    pairs = _mapping(row.mapping)
    names = {param.name for param in params}
    fed = {param: arg for arg, param in pairs.items() if param in names}
    rest = ", ".join(f"{arg}={param}" for arg, param in pairs.items() if param not in names)
    return fed, rest


def unified_names(form: RouterForm, params: dict[str, list[Any]]) -> list[str]:
    """Every unified parameter name the form gives so far: the choices of each mapping row."""
    found: set[str] = set()
    for index, row in enumerate(form.operations):
        pairs = _mapping(row.mapping)
        renamed = set(pairs.values())
        found.update(arg for arg in pairs if arg)
        found.update(p.name for p in params.get(f"op-{index}-params", []) if p.name not in renamed)
    return sorted(found)


def stale_tables(form: RouterForm, params: dict[str, list[Any]]) -> list[int]:
    """Operations whose mapping cell was drawn for another tool than the one now in the tool field,
    or shows the text field while the tool's parameters are now known (its backend came up)."""
    return [
        index
        for index, row in enumerate(form.operations)
        if row.table_tool != row.tool or (not row.table_shown and f"op-{index}-params" in params)
    ]


def _mapping(text: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for part in text.split(","):
        if "=" in part:
            key, _, value = part.partition("=")
            if key.strip():
                pairs[key.strip()] = value.strip()
        elif part.strip():
            pairs[part.strip()] = ""  # reported by the validator as an empty target
    return pairs


def to_definition(form: RouterForm) -> dict[str, Any]:
    """The definition the form describes, in the config file's shape (empty parts left out)."""
    definition: dict[str, Any] = {"name": form.name, "description": form.description, "routing": form.routing}
    operations = []
    for row in form.operations:
        operation: dict[str, Any] = {"slug": row.slug, "tool": row.tool}
        mapping = _mapping(row.mapping)
        if mapping:
            operation["parameter_mapping"] = mapping
        operations.append({**operation, **row.kept})
    definition["operations"] = operations
    rules = []
    for rule_row in form.rules:
        condition = _condition(rule_row)
        rule: dict[str, Any] = {"condition": condition, "operation": rule_row.operation}
        if rule_row.priority:
            rule["priority"] = scalar(rule_row.priority)
        rules.append(rule)
    if rules:
        definition["rules"] = rules
    if form.default_operation:
        definition["default_operation"] = form.default_operation
    return {**definition, **form.kept}


def _nested(text: str) -> Any:
    try:
        return structured(text, "the conditions")
    except Unreadable:
        return text  # the validator reports it at the rule's value


def _condition(row: RuleRow) -> dict[str, Any]:
    """A rule's condition: a leaf compares one field; `all`/`any`/`not` hold conditions written as YAML."""
    if row.type in GROUP_TYPES:
        return {"type": row.type, "conditions": _nested(row.value)}
    if row.type == "not":
        return {"type": row.type, "condition": _nested(row.value)}
    condition: dict[str, Any] = {"type": row.type, "field": row.field}
    if row.type != "exists":
        condition["value"] = scalar(row.value)
    if row.case:
        condition["case_sensitive"] = True
    return condition


def _condition_value(condition: dict[str, Any]) -> str:
    kind = condition.get("type")
    if kind in GROUP_TYPES:
        return inline(condition.get("conditions"))
    if kind == "not":
        return inline(condition.get("condition"))
    value = condition.get("value")
    return inline(value) if isinstance(value, list | dict) else ("" if value is None else str(value))


def field_problems(form: RouterForm) -> list[Problem]:
    """A group rule whose conditions are not readable YAML, said at the rule's value."""
    found = []
    for index, row in enumerate(form.rules):
        if row.type in (*GROUP_TYPES, "not"):
            try:
                structured(row.value, "the conditions")
            except Unreadable as error:
                found.append(Problem(f"rules[{index}].condition.value", str(error)))
    return found


def from_definition(definition: Mapping[str, Any]) -> RouterForm:
    """The form for a definition (from YAML, or a stored router being edited)."""

    def text(value: Any) -> str:
        return "" if value is None else str(value)

    operations = [
        OperationRow(
            slug=text(op.get("slug")),
            tool=text(op.get("tool")),
            mapping=", ".join(f"{k}={v}" for k, v in (op.get("parameter_mapping") or {}).items()),
            kept=rest_of(op, ("slug", "tool", "parameter_mapping")),
        )
        for op in definition.get("operations") or []
        if isinstance(op, dict)
    ]
    rules = []
    for rule in definition.get("rules") or []:
        if not isinstance(rule, dict):
            continue
        condition = object_at(rule, "condition")
        rules.append(
            RuleRow(
                type=text(condition.get("type")) or "contains",
                field=text(condition.get("field")),
                value=_condition_value(condition),
                case=bool(condition.get("case_sensitive") or condition.get("caseSensitive")),
                priority=text(rule.get("priority")),
                operation=text(rule.get("operation")),
            )
        )
    return RouterForm(
        name=text(definition.get("name")),
        description=text(definition.get("description")),
        routing=text(definition.get("routing")) or "rule_based",
        default_operation=text(definition.get("default_operation")),
        operations=operations or [OperationRow()],
        rules=rules,
        kept=rest_of(definition, SHOWN),
    )


def slot_of(problem: Problem) -> str | None:
    """The form field a problem belongs at, or None when it is about the whole definition."""
    path = problem.path.removeprefix("definition").lstrip(".")
    found = _PATH.match(path)
    if found:
        kind, index, rest = found.group(1), found.group(2), found.group(3) or ""
        head = rest.split(".")[0].split("[")[0]
        if kind == "operations":
            return f"op-{index}-{_OP_FIELDS.get(head, 'row')}"
        if head == "condition":
            sub = rest.split(".")[1] if "." in rest else ""
            if sub.startswith("condition"):  # inside an all/any/not: the YAML in the value box
                return f"rule-{index}-value"
            return f"rule-{index}-{_RULE_CONDITION.get(sub, 'type')}"
        return f"rule-{index}-{head if head in ('operation', 'priority') else 'row'}"
    top = path.split(".")[0].split("[")[0]
    return top if top in TOP_SLOTS else None


def place(problems: list[Problem], form: RouterForm) -> tuple[dict[str, list[str]], list[str]]:
    """({slot: messages}, messages about the whole definition)."""
    return place_at(problems, form, slot_of)


CONDITIONS = tuple(CONDITION_TYPES)
"""The condition types the form offers; for `all`/`any`/`not` the value box holds the nested
conditions as YAML (`[{type: contains, field: url, value: x}, ...]`)."""


def add_row(form: RouterForm, action: str, tool: str) -> bool:
    """Add an operation (empty, or the tool picked from the catalog search) or a rule."""
    if action in ("add_op", "pick"):
        if len(form.operations) < MAX_ROWS:
            slug = tool.rsplit("/", 1)[-1].rsplit("__", 1)[-1][:64] if tool else ""
            row = OperationRow(slug=slug, tool=tool)
            if action == "pick" and len(form.operations) == 1 and not form.operations[0].tool:
                form.operations[0] = row  # the empty first row takes the first pick
            else:
                form.operations.append(row)
        return True
    if action == "add_rule":
        if len(form.rules) < MAX_ROWS:
            form.rules.append(RuleRow(priority=str(len(form.rules) + 1)))
        return True
    return False


ROUTER = FormKind(
    kind="router",
    title="router",
    intro="A router is one tool that sends each call to one of several tools, chosen by rules or by the agent.",
    fields_template="_fields_router.html",
    read=read_form,
    to_definition=to_definition,
    from_definition=from_definition,
    place=place,
    add_row=add_row,
    field_problems=field_problems,
    row_tools=lambda form: [(f"op-{i}-params", row.tool) for i, row in enumerate(form.operations)],
    choices={"conditions": CONDITIONS, "routings": ROUTINGS},
    stale_tables=stale_tables,
)
