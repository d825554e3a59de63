"""The router builder: its form read into a definition (the same document as the config file and the
REST API), a definition written back into the form, YAML both ways, and each problem put at its field.

The form is flat: `op-<i>-slug|tool|mapping` for operations, `rule-<i>-type|field|value|case|
priority|operation` for rules, plus `name`, `description`, `routing`, `default_operation`.
A problem's path (`definition.rules[0].condition.type`) names its field's slot (`rule-0-type`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from toolweave.composite.router.config import CONDITION_TYPES
from toolweave.problems import Problem

MAX_ROWS = 50
"""Operations or rules one form may hold (a bound on what one request makes the gateway check)."""
MAX_YAML = 200_000
ROUTINGS = ("rule_based", "agent_driven")
TOP_SLOTS = ("name", "description", "routing", "default_operation", "operations", "rules")
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


@dataclass(slots=True)
class RuleRow:
    type: str = "contains"
    field: str = ""
    value: str = ""
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


def _count(form: Any, key: str) -> int:
    try:
        return max(0, min(int(form.get(key) or 0), MAX_ROWS))
    except ValueError:
        return 0


def _text(form: Any, key: str, limit: int = 10_000) -> str:
    value = form.get(key)
    return value.strip()[:limit] if isinstance(value, str) else ""


def read_form(form: Any) -> RouterForm:
    """The builder's fields as they were sent (rows removed with their ✕ are left out)."""
    removed = _text(form, "remove")
    operations = [
        OperationRow(
            slug=_text(form, f"op-{i}-slug"),
            tool=_text(form, f"op-{i}-tool"),
            mapping=_text(form, f"op-{i}-mapping"),
        )
        for i in range(_count(form, "ops"))
        if removed != f"op-{i}"
    ]
    rules = [
        RuleRow(
            type=_text(form, f"rule-{i}-type") or "contains",
            field=_text(form, f"rule-{i}-field"),
            value=_text(form, f"rule-{i}-value"),
            case=form.get(f"rule-{i}-case") == "true",
            priority=_text(form, f"rule-{i}-priority"),
            operation=_text(form, f"rule-{i}-operation"),
        )
        for i in range(_count(form, "rules"))
        if removed != f"rule-{i}"
    ]
    return RouterForm(
        name=_text(form, "name", 200),
        description=_text(form, "description"),
        routing=_text(form, "routing") or "rule_based",
        default_operation=_text(form, "default_operation"),
        operations=operations,
        rules=rules,
    )


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


def _scalar(text: str) -> Any:
    """A rule's value as typed: numbers and booleans as such (for gt/lt/equals), else the text."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def to_definition(form: RouterForm) -> dict[str, Any]:
    """The definition the form describes, in the config file's shape (empty parts left out)."""
    definition: dict[str, Any] = {"name": form.name, "description": form.description, "routing": form.routing}
    operations = []
    for row in form.operations:
        operation: dict[str, Any] = {"slug": row.slug, "tool": row.tool}
        mapping = _mapping(row.mapping)
        if mapping:
            operation["parameter_mapping"] = mapping
        operations.append(operation)
    definition["operations"] = operations
    rules = []
    for row in form.rules:
        condition: dict[str, Any] = {"type": row.type, "field": row.field}
        if row.type != "exists":
            condition["value"] = _scalar(row.value)
        if row.case:
            condition["case_sensitive"] = True
        rule: dict[str, Any] = {"condition": condition, "operation": row.operation}
        if row.priority:
            rule["priority"] = _scalar(row.priority)
        rules.append(rule)
    if rules:
        definition["rules"] = rules
    if form.default_operation:
        definition["default_operation"] = form.default_operation
    return definition


def from_definition(definition: dict[str, Any]) -> RouterForm:
    """The form for a definition (from YAML, or a stored router being edited)."""

    def text(value: Any) -> str:
        return "" if value is None else str(value)

    operations = [
        OperationRow(
            slug=text(op.get("slug")),
            tool=text(op.get("tool")),
            mapping=", ".join(f"{k}={v}" for k, v in (op.get("parameter_mapping") or {}).items()),
        )
        for op in definition.get("operations") or []
        if isinstance(op, dict)
    ]
    rules = []
    for rule in definition.get("rules") or []:
        if not isinstance(rule, dict):
            continue
        condition = rule.get("condition") if isinstance(rule.get("condition"), dict) else {}
        rules.append(
            RuleRow(
                type=text(condition.get("type")) or "contains",
                field=text(condition.get("field")),
                value=text(condition.get("value")),
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
    )


def to_yaml(definition: dict[str, Any]) -> str:
    return yaml.safe_dump(definition, sort_keys=False, allow_unicode=True)


def from_yaml(text: str) -> tuple[dict[str, Any] | None, str]:
    """(definition, "") or (None, why it is not one)."""
    if len(text) > MAX_YAML:
        return None, f"the YAML is longer than {MAX_YAML} characters"
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        return None, f"not valid YAML: {error}"
    if not isinstance(loaded, dict):
        return None, "the YAML must be a mapping (one router definition)"
    return loaded, ""


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
            return f"rule-{index}-{_RULE_CONDITION.get(sub, 'type')}"
        return f"rule-{index}-{head if head in ('operation', 'priority') else 'row'}"
    top = path.split(".")[0].split("[")[0]
    return top if top in TOP_SLOTS else None


def place(problems: list[Problem], form: RouterForm) -> tuple[dict[str, list[str]], list[str]]:
    """({slot: messages}, messages about the whole definition)."""
    known = set(form.slots())
    at: dict[str, list[str]] = {}
    general: list[str] = []
    for problem in problems:
        slot = slot_of(problem)
        if slot is not None and slot in known:
            at.setdefault(slot, []).append(problem.message)
        else:
            general.append(str(problem))
    return at, general


CONDITIONS = tuple(t for t in CONDITION_TYPES if t not in ("all", "any", "not"))
"""The condition types the form offers (groups are written in the YAML editor)."""
