"""Router definitions (docs/composites.md): one tool in front of several operations.

A router either picks its operation by deterministic rules on the input
(`rule_based`) or lets the agent pick it through a required `operation`
enum (`agent_driven`), then maps the unified parameters onto the chosen
operation's own parameters.

Everything that can be checked without the catalog is checked here, so a
config file reports all of its router problems at once: structural problems
through pydantic (with paths), cross-field problems through `static_issues()`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final, Literal

import re2
from pydantic import Field, ValidationInfo, field_validator

from toolweave.composite.definition import CompositeBase, ToolReference
from toolweave.fields import StrictModel
from toolweave.problems import Problem
from toolweave.schemas.check import input_schema_problem
from toolweave.templates import check_syntax

STRING_TYPES: Final = ("contains", "equals", "matches", "starts_with", "ends_with")
"""Compare the field's string form with `value`; `caseSensitive` applies."""
COMPARE_TYPES: Final = ("gt", "gte", "lt", "lte")
"""Compare the field numerically with a number `value`."""
LEAF_TYPES: Final = (*STRING_TYPES, "exists", "in", *COMPARE_TYPES)
GROUP_TYPES: Final = ("all", "any")
CONDITION_TYPES: Final = (*LEAF_TYPES, *GROUP_TYPES, "not")

SLUG_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
SELECTOR_PARAM: Final = "operation"
"""The unified parameter through which an agent picks the operation (agent_driven)."""

Scalar = str | int | float | bool


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _type_of(info: ValidationInfo) -> str | None:
    """The condition's already-validated `type`, None when it was invalid."""
    found = info.data.get("type")
    return found if isinstance(found, str) else None


class Condition(StrictModel):
    """One routing condition (docs/composites.md lists every type).

    Leaves read one input `field` (a dotted path such as `target.url`):
    `contains`, `equals`, `matches` (RE2: linear time, no catastrophic
    backtracking), `starts_with`, `ends_with` compare its string form with
    `value`; `exists`; `in` (one of a list of values); `gt`/`gte`/`lt`/`lte`
    (numeric). Combinators: `all` / `any` (a list in `conditions`) and `not`
    (one `condition`). `caseSensitive` defaults to false.
    """

    type: str
    field: str | None = Field(default=None, validate_default=True)
    value: Any = Field(default=None, validate_default=True)
    case_sensitive: bool | None = Field(default=None, alias="caseSensitive", validate_default=True)
    conditions: list[Condition] | None = Field(default=None, validate_default=True)
    condition: Condition | None = Field(default=None, validate_default=True)

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in CONDITION_TYPES:
            raise ValueError(f"unknown type {value!r}")
        return value

    @field_validator("field")
    @classmethod
    def _field_for_leaves(cls, value: str | None, info: ValidationInfo) -> str | None:
        kind = _type_of(info)
        if kind is None:
            return value
        if kind not in LEAF_TYPES:
            if value is not None:
                raise ValueError(f"not used by a {kind!r} condition")
            return value
        if value is None:
            raise ValueError(f"a {kind!r} condition needs the input field to check")
        if not value or any(not part for part in value.split(".")):
            raise ValueError(f"{value!r} is not a field path (e.g. 'url' or 'target.url')")
        return value

    @field_validator("value")
    @classmethod
    def _value_fits_type(cls, value: Any, info: ValidationInfo) -> Any:
        kind = _type_of(info)
        if kind is None:
            return value
        problem = _value_problem(kind, value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("case_sensitive")
    @classmethod
    def _case_for_text(cls, value: bool | None, info: ValidationInfo) -> bool | None:
        kind = _type_of(info)
        if value is not None and kind is not None and kind not in (*STRING_TYPES, "in"):
            raise ValueError(f"has no effect on a {kind!r} condition")
        return value

    @field_validator("conditions")
    @classmethod
    def _conditions_for_groups(
        cls, value: list[Condition] | None, info: ValidationInfo
    ) -> list[Condition] | None:
        kind = _type_of(info)
        if kind is None:
            return value
        if kind in GROUP_TYPES and not value:
            raise ValueError(f"an {kind!r} condition needs a non-empty list of conditions")
        if kind not in GROUP_TYPES and value is not None:
            raise ValueError(f"only 'all' and 'any' take a list of conditions (this is {kind!r})")
        return value

    @field_validator("condition")
    @classmethod
    def _condition_for_not(cls, value: Condition | None, info: ValidationInfo) -> Condition | None:
        kind = _type_of(info)
        if kind is None:
            return value
        if kind == "not" and value is None:
            raise ValueError("a 'not' condition needs the condition to negate")
        if kind != "not" and value is not None:
            raise ValueError(f"only 'not' takes a single condition (this is {kind!r})")
        return value

    @property
    def is_case_sensitive(self) -> bool:
        return bool(self.case_sensitive)

    def walk(self, path: str) -> Iterator[tuple[str, Condition]]:
        """This condition and every nested one, each with its relative path."""
        yield path, self
        for index, child in enumerate(self.conditions or ()):
            yield from child.walk(f"{path}.conditions[{index}]")
        if self.condition is not None:
            yield from self.condition.walk(f"{path}.condition")


def _value_problem(kind: str, value: Any) -> str | None:
    if kind in STRING_TYPES:
        if kind == "matches" and not isinstance(value, str):
            return "a 'matches' condition needs a regular expression (RE2 syntax) as its value"
        if not _is_scalar(value):
            return f"a {kind!r} condition needs a string, number or boolean value"
        return None
    if kind == "in":
        if not isinstance(value, list) or not value or not all(_is_scalar(item) for item in value):
            return "an 'in' condition needs a non-empty list of strings, numbers or booleans"
        return None
    if kind in COMPARE_TYPES:
        return None if _is_number(value) else f"a {kind!r} condition needs a number value"
    if value is not None:
        return f"not used by a {kind!r} condition"
    return None


class RouterOperation(StrictModel):
    """One operation the router may run: a backend tool plus how unified parameters reach it."""

    slug: str
    tool: str
    """`backend/tool`, `backend.tool` or an exposed name."""
    display_name: str | None = None
    description: str | None = None
    """What this operation is for; the tool's own description when absent."""
    parameter_mapping: dict[str, str] = Field(default_factory=dict)
    """`{unified_param: operation_param}`; unmapped parameters keep their name."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Fixed arguments always sent to this operation (hidden from the unified schema)."""

    @field_validator("slug")
    @classmethod
    def _slug_pattern(cls, value: str) -> str:
        if not SLUG_RE.match(value):
            raise ValueError(f"slug {value!r} must match ^[A-Za-z0-9][A-Za-z0-9_.-]{{0,63}}$")
        return value

    @field_validator("parameter_mapping")
    @classmethod
    def _mapping_names(cls, value: dict[str, str]) -> dict[str, str]:
        for unified, target in value.items():
            if not unified or not target:
                raise ValueError("parameter names in parameter_mapping cannot be empty")
        return value

    @property
    def label(self) -> str:
        return self.display_name or self.slug


class RoutingRule(StrictModel):
    condition: Condition
    operation: str
    """The slug of the operation to run when the condition matches."""
    priority: int = 0
    """Lower runs first; equal priorities keep their declared order."""


class RouterDef(CompositeBase):
    """A router composite.

    Decisions users rely on:

    - `required_strategy` defaults to `all`: a unified parameter is required
      only when EVERY operation requires it. Which operation runs depends on
      the input (or the agent's choice), so forcing the agent to always send
      a parameter that only one operation needs would be wrong; a missing
      parameter the chosen operation needs is reported at call time, naming
      the unified parameter. `any` requires a parameter as soon as one
      operation requires it.
    - `agent_driven` routers take no `rules` and no `default_operation`:
      the agent always names the operation, so those would never run, and a
      definition carrying them is reported as an error rather than silently
      ignored.
    - `rule_based` routers need at least one rule or a `default_operation`.
    """

    kind: Literal["router"] = "router"
    routing: Literal["rule_based", "agent_driven"] = "rule_based"
    operations: list[RouterOperation] = Field(default_factory=list)
    rules: list[RoutingRule] = Field(default_factory=list)
    default_operation: str | None = None
    input_schema: dict[str, Any] | None = None
    """Explicit unified input schema; merged from the operations when absent."""
    required_strategy: Literal["any", "all"] = "all"
    success_template: str | None = None
    """Jinja2 (sandboxed), rendered into a leading text item of a successful result."""
    error_template: str | None = None
    """Jinja2 (sandboxed), rendered into a leading text item of an error result."""

    def operation(self, slug: str) -> RouterOperation | None:
        return next((op for op in self.operations if op.slug == slug), None)

    def slugs(self) -> list[str]:
        return [op.slug for op in self.operations]

    def tool_references(self) -> list[ToolReference]:
        return [ToolReference(f"operations[{i}].tool", op.tool) for i, op in enumerate(self.operations)]

    def static_issues(self) -> list[Problem]:
        """Every problem that needs no catalog, each as (relative path, message)."""
        return [
            *self._operation_issues(),
            *self._routing_issues(),
            *self._pattern_issues(),
            *self._template_issues(),
            *self._schema_issues(),
        ]

    def _operation_issues(self) -> list[Problem]:
        if not self.operations:
            return [Problem("operations", "a router needs at least one operation")]
        issues: list[Problem] = []
        first_index: dict[str, int] = {}
        for index, op in enumerate(self.operations):
            if op.slug in first_index:
                issues.append(
                    Problem(
                        f"operations[{index}].slug",
                        f"duplicate slug {op.slug!r} (also operations[{first_index[op.slug]}])",
                    )
                )
            first_index.setdefault(op.slug, index)
            issues.extend(self._mapping_issues(index, op))
        return issues

    def _mapping_issues(self, index: int, op: RouterOperation) -> list[Problem]:
        issues: list[Problem] = []
        mapped_from: dict[str, str] = {}
        where = f"operations[{index}]"
        for unified, target in op.parameter_mapping.items():
            if target in mapped_from:
                issues.append(
                    Problem(
                        f"{where}.parameter_mapping.{unified}",
                        f"{unified!r} and {mapped_from[target]!r} both map to {target!r}",
                    )
                )
            mapped_from.setdefault(target, unified)
            if self.routing == "agent_driven" and unified == SELECTOR_PARAM:
                issues.append(
                    Problem(
                        f"{where}.parameter_mapping.{unified}",
                        "'operation' is the operation selector of an agent_driven router; "
                        "map another unified parameter name",
                    )
                )
        for key in op.arguments:
            if key in mapped_from:
                issues.append(
                    Problem(
                        f"{where}.arguments.{key}",
                        f"{key!r} is both fixed here and mapped from {mapped_from[key]!r} in parameter_mapping",
                    )
                )
        return issues

    def _routing_issues(self) -> list[Problem]:
        known = self.slugs()
        listing = "operations: " + ", ".join(dict.fromkeys(known)) if known else "no operations defined"
        issues: list[Problem] = []
        if self.routing == "agent_driven":
            if self.rules:
                issues.append(
                    Problem(
                        "rules", "rules are not used by agent_driven routing (remove them or use rule_based)"
                    )
                )
            if self.default_operation is not None:
                issues.append(
                    Problem(
                        "default_operation",
                        "agent_driven routing always takes the agent's choice; "
                        "default_operation is only used by rule_based routing",
                    )
                )
        elif not self.rules and self.default_operation is None:
            issues.append(
                Problem("rules", "rule_based routing needs at least one rule or a default_operation")
            )
        for index, rule in enumerate(self.rules):
            if rule.operation not in known:
                issues.append(
                    Problem(f"rules[{index}].operation", f"unknown operation {rule.operation!r} ({listing})")
                )
        if self.default_operation is not None and self.default_operation not in known:
            issues.append(
                Problem("default_operation", f"unknown operation {self.default_operation!r} ({listing})")
            )
        return issues

    def _pattern_issues(self) -> list[Problem]:
        issues: list[Problem] = []
        for index, rule in enumerate(self.rules):
            for path, condition in rule.condition.walk(f"rules[{index}].condition"):
                if condition.type == "matches":
                    problem = re2_problem(str(condition.value), condition.is_case_sensitive)
                    if problem:
                        issues.append(Problem(f"{path}.value", problem))
        return issues

    def _template_issues(self) -> list[Problem]:
        issues: list[Problem] = []
        for key in ("success_template", "error_template"):
            source = getattr(self, key)
            problem = check_syntax(source) if source is not None else None
            if problem:
                issues.append(Problem(key, problem))
        return issues

    def _schema_issues(self) -> list[Problem]:
        if self.input_schema is None:
            return []
        problem = input_schema_problem(self.input_schema)
        return [Problem("input_schema", problem)] if problem else []


def re2_options(case_sensitive: bool) -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = case_sensitive
    return options


def re2_problem(pattern: str, case_sensitive: bool) -> str | None:
    """RE2's own message for a pattern it rejects (e.g. backreferences, lookaround)."""
    try:
        re2.compile(pattern, options=re2_options(case_sensitive))
    except re2.error as error:
        detail = error.args[0] if error.args else error
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return f"invalid RE2 pattern: {detail}"
    return None
