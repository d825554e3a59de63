"""Running a router: one tool in front of several operations (docs/composites.md).

Built once per catalog snapshot: references resolved, conditions compiled,
rules sorted, the unified schema merged, each operation's validator created,
templates compiled. A call then only picks the operation (a few compiled
predicates), maps and validates the arguments, and makes one inner call.

Call-time semantics (documented for users):

- `rule_based`: rules run lowest `priority` first (ties in declared order);
  the first match wins, else `default_operation`; with neither, the result is
  an error listing the rules tried, and nothing is called.
- `agent_driven`: the `operation` argument names the slug; a missing or
  unknown one is an error listing the valid slugs.
- Arguments: mapped parameters are renamed (`parameter_mapping`); other
  arguments pass through under their own name only when the operation's
  schema lists them (arguments meant for other operations are dropped);
  fixed `arguments` are added last. The result is validated against the
  operation tool's own schema; problems name the UNIFIED parameter.
- `_meta["toolweave"]` = `{kind: "router", operation, tool, reason}`, where
  `tool` is the exposed name of the backend tool that ran and `reason` is the
  matching rule (`url contains 'linkedin.com'`), `default operation` or
  `agent selected`.
- `success_template` / `error_template` are rendered into a leading text
  item. Their context: every field of the result's structured content, then
  every argument (unified names), then `params` / `arguments` (all
  arguments), `data` / `structured` (the structured content), `text` (the
  result's text), `content_preview` (its first 500 characters),
  `error_message` (the text of an error, else empty), `is_error`,
  `operation`, `operation_name`, `tool` and `reason`. Templates are strict
  (an undefined name is an error, use `| default(...)`); a template that
  fails to render leaves the result intact and says why in that text item.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import mcp_types as types
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator

from toolweave.composite.base import ResolvedTool, RunContext
from toolweave.composite.router.conditions import CompiledCondition
from toolweave.composite.router.config import SELECTOR_PARAM
from toolweave.results import META_KEY, error_result, joined_text, text
from toolweave.templates import CompiledTemplate, TemplateError

KIND: Final = "router"
REASON_DEFAULT: Final = "default operation"
REASON_AGENT: Final = "agent selected"
PREVIEW_CHARS: Final = 500


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation, ready to run: its tool, how arguments reach it, how they are checked."""

    slug: str
    label: str
    target: ResolvedTool
    mapping: tuple[tuple[str, str], ...]
    """(unified name, operation parameter) renames."""
    passthrough: frozenset[str]
    """Argument names forwarded as they are (the operation lists them and nothing else claims them)."""
    fixed: Mapping[str, Any]
    unified_names: Mapping[str, str]
    """operation parameter → the unified name the agent should use for it."""
    validator: Validator | None
    secrets: frozenset[str] = frozenset()
    """Operation parameters holding secrets: their values never appear in a message."""
    accepts: Callable[[Any], bool] | None = None
    """A fast check that says only "valid" (`catalog.validation.fast_check`); jsonschema decides the rest."""

    def arguments_for(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        mapped: dict[str, Any] = {}
        for unified, target in self.mapping:
            if unified in arguments:
                mapped[target] = arguments[unified]
        for name, value in arguments.items():
            if name in self.passthrough:
                mapped[name] = value
        if self.fixed:
            mapped.update(self.fixed)
        return mapped

    def problems(self, mapped: Mapping[str, Any]) -> list[str]:
        """Why `mapped` does not fit the operation's schema, in the agent's (unified) terms."""
        if self.validator is None or (self.accepts is not None and self.accepts(mapped)):
            return []
        return sorted(self._problem(error, mapped) for error in self.validator.iter_errors(mapped))

    def _problem(self, error: ValidationError, mapped: Mapping[str, Any]) -> str:
        if error.validator == "required" and not error.path:
            required = error.validator_value if isinstance(error.validator_value, list) else []
            missing = [name for name in required if name not in mapped]
            return "; ".join(self._missing(name) for name in missing) or error.message
        if not error.path:
            return error.message
        first = str(error.path[0])
        detail = f"invalid ({error.validator})" if first in self.secrets else error.message
        if first in self.fixed:
            return f"the fixed argument {first!r} is rejected by {self.target.name}: {detail} (fix the router definition)"
        where = ".".join([self._unified(first), *(str(part) for part in list(error.path)[1:])])
        return f"parameter {where!r}: {detail}"

    def _missing(self, target: str) -> str:
        unified = self._unified(target)
        if unified == target:
            return f"missing required parameter {unified!r}"
        return f"missing required parameter {unified!r} (sent to {self.target.name} as {target!r})"

    def _unified(self, target: str) -> str:
        return self.unified_names.get(target, target)


@dataclass(frozen=True, slots=True)
class Rule:
    condition: CompiledCondition
    operation: Operation
    priority: int


@dataclass(slots=True)
class RouterComposite:
    """A built router; `run` is the per-call path."""

    name: str
    tool: types.Tool
    references: frozenset[str]
    operations: dict[str, Operation]
    rules: tuple[Rule, ...]
    default: Operation | None
    agent_driven: bool
    success_template: CompiledTemplate | None
    error_template: CompiledTemplate | None
    kind: str = KIND

    async def run(self, arguments: Mapping[str, Any], ctx: RunContext) -> types.CallToolResult:
        args = arguments if isinstance(arguments, Mapping) else {}
        chosen = self._choose(args)
        if isinstance(chosen, types.CallToolResult):
            return self._decorated(chosen, args, None, chosen_reason(chosen))
        operation, reason = chosen
        mapped = operation.arguments_for(args)
        problems = operation.problems(mapped)
        if problems:
            message = f"Invalid arguments for operation {operation.slug!r}:\n" + "\n".join(
                f"- {problem}" for problem in problems
            )
            return self._decorated(error_result(message), args, operation, reason)
        try:
            result = await ctx.call(operation.target.name, mapped)
        except Exception as error:  # noqa: BLE001 - the agent gets an error result, never a crash
            result = error_result(f"calling {operation.target.name} failed: {error or type(error).__name__}")
        return self._decorated(result, args, operation, reason)

    def choose(self, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
        """(slug, reason) the router would pick for these arguments, None when it would refuse."""
        chosen = self._choose(arguments)
        if isinstance(chosen, types.CallToolResult):
            return None
        return chosen[0].slug, chosen[1]

    def _choose(self, args: Mapping[str, Any]) -> tuple[Operation, str] | types.CallToolResult:
        if self.agent_driven:
            return self._agent_choice(args)
        for rule in self.rules:
            reason = rule.condition.match(args)
            if reason is not None:
                return rule.operation, reason
        if self.default is not None:
            return self.default, REASON_DEFAULT
        return self._no_match()

    def _agent_choice(self, args: Mapping[str, Any]) -> tuple[Operation, str] | types.CallToolResult:
        slug = args.get(SELECTOR_PARAM)
        operation = self.operations.get(slug) if isinstance(slug, str) else None
        if operation is not None:
            return operation, REASON_AGENT
        valid = ", ".join(self.operations)
        if slug is None:
            message = f"Missing required parameter 'operation': choose one of: {valid}."
            reason = "no operation given"
        else:
            message = f"Unknown operation {slug!r}: choose one of: {valid}."
            reason = "unknown operation"
        return error_result(message, meta=_meta(None, reason))

    def _no_match(self) -> types.CallToolResult:
        tried = "\n".join(
            f"{index}. {rule.condition.description} → {rule.operation.slug}"
            for index, rule in enumerate(self.rules, start=1)
        )
        message = (
            f"No routing rule of {self.name!r} matched these arguments and no default operation is configured, "
            "so nothing was called. Rules tried, in order:\n" + (tried or "(none)")
        )
        return error_result(message, meta=_meta(None, "no rule matched"))

    def _decorated(
        self,
        result: types.CallToolResult,
        args: Mapping[str, Any],
        operation: Operation | None,
        reason: str,
    ) -> types.CallToolResult:
        meta = dict(result.meta or {})
        meta[META_KEY] = _meta(operation, reason)
        template = self.error_template if result.is_error else self.success_template
        content = list(result.content)
        if template is not None:
            content.insert(0, text(self._render(template, result, args, operation, reason)))
        return result.model_copy(update={"meta": meta, "content": content})

    def _render(
        self,
        template: CompiledTemplate,
        result: types.CallToolResult,
        args: Mapping[str, Any],
        operation: Operation | None,
        reason: str,
    ) -> str:
        try:
            return template.render_text(template_context(result, args, operation, reason))
        except TemplateError as error:
            which = "error_template" if result.is_error else "success_template"
            return f"[{self.name}: {which} could not be rendered: {error}]"


def chosen_reason(result: types.CallToolResult) -> str:
    found = (result.meta or {}).get(META_KEY) or {}
    return str(found.get("reason") or "")


def _meta(operation: Operation | None, reason: str) -> dict[str, Any]:
    return {
        "kind": KIND,
        "operation": operation.slug if operation else None,
        "tool": operation.target.name if operation else None,
        "reason": reason,
    }


def template_context(
    result: types.CallToolResult, args: Mapping[str, Any], operation: Operation | None, reason: str
) -> dict[str, Any]:
    """What success/error templates see (see the module docstring)."""
    structured = result.structured_content
    body = joined_text(result)
    context: dict[str, Any] = dict(structured) if isinstance(structured, Mapping) else {}
    context.update(args)
    context.update(
        params=dict(args),
        arguments=dict(args),
        data=structured,
        structured=structured,
        text=body,
        content_preview=body[:PREVIEW_CHARS],
        error_message=body if result.is_error else "",
        is_error=result.is_error,
        operation=operation.slug if operation else None,
        operation_name=operation.label if operation else None,
        tool=operation.target.name if operation else None,
        reason=reason,
    )
    return context
