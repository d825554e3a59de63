"""Running one step: a tool call (with retries), an elicitation, or a forEach loop.

Each runner returns a `StepOutcome` and never raises for a step's failure:
the scheduler decides what a failure means for the workflow. Every call goes
through `ctx.call`, i.e. back through the executor, so policy and admission
apply to inner calls exactly as to a client's own.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from toolweave.composite.base import RunContext
from toolweave.composite.errors import ElicitUnavailable
from toolweave.composite.workflow.plan import (
    ELICIT_VALUE_KEY,
    ElicitPlan,
    ForEachPlan,
    StepPlan,
    ToolCallPlan,
)
from toolweave.results import joined_text
from toolweave.runs import StepStatus
from toolweave.schemas.coerce import coerce
from toolweave.secrets import DERIVED_SECRETS, redact_text, secret_values
from toolweave.templates import TemplateError, copy_json, run_bounded

logger = logging.getLogger(__name__)

MAX_ERROR_CHARS = 2000
"""Longest error text kept from a failed inner call (the agent needs the gist, not a dump)."""


@dataclass(slots=True)
class StepOutcome:
    status: StepStatus
    """completed, failed, skipped or cancelled."""
    output: Any = None
    """What later templates see as `steps.<id>.output`."""
    result: types.CallToolResult | None = None
    """The inner call's own result (tool steps), kept for a workflow without `output`."""
    error: str | None = None
    attempts: int = 0
    skip_remaining: bool = False
    reason: str | None = None
    """Why a step was skipped or how an elicitation ended, for the final message."""
    content: list[dict[str, Any]] = field(default_factory=list)
    latency_ms: float = 0.0


def failed(error: str, attempts: int = 0) -> StepOutcome:
    return StepOutcome("failed", output={}, error=error, attempts=attempts)


def skipped(step: StepPlan, reason: str) -> StepOutcome:
    return StepOutcome("skipped", output=default_output(step), reason=reason)


def default_output(step: StepPlan) -> dict[str, Any]:
    return copy_json(step.default_results) if step.default_results is not None else {}


# -- conditions ---------------------------------------------------------------------

_TRUE_TEXT = frozenset({"true", "yes", "1"})
_FALSE_TEXT = frozenset({"false", "no", "0", "", "none", "null"})


def condition_holds(step: StepPlan, context: Mapping[str, Any]) -> bool:
    """Evaluate a step's condition; raises TemplateError when it is not a yes/no value."""
    if step.condition is None:
        return True
    value = step.condition.render(context)
    if isinstance(value, bool) or value is None:
        return bool(value)
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE_TEXT:
            return True
        if text in _FALSE_TEXT:
            return False
    raise TemplateError("a condition must evaluate to true or false")


# -- tool calls ---------------------------------------------------------------------


def render_arguments(call: ToolCallPlan, context: Mapping[str, Any]) -> dict[str, Any]:
    """Render a call's arguments and coerce text to the target's input schema types."""
    arguments = call.arguments.render(context)
    if not isinstance(arguments, dict):
        raise TemplateError("arguments must render to an object")
    if call.schema is None:
        return arguments
    try:
        coerced: dict[str, Any] = coerce(arguments, call.schema)  # an object stays an object
        return coerced
    except TemplateError as error:
        raise TemplateError(f"argument {error}") from None


def step_output(result: types.CallToolResult) -> dict[str, Any]:
    """ToolHive's rule: structuredContent when it is an object, else `{"text": <joined text>}`."""
    structured = result.structured_content
    if isinstance(structured, dict):
        return structured
    return {"text": joined_text(result)}


def error_text(result: types.CallToolResult) -> str:
    text = joined_text(result).strip() or "the tool reported an error without a message"
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


async def call_once(ctx: RunContext, call: ToolCallPlan, arguments: dict[str, Any]) -> types.CallToolResult:
    """One inner call; an exception from the executor becomes an error result (failures are values).

    Fields computed from a secret parameter are secret for the inner call's record too
    (`secrets.DERIVED_SECRETS`), whatever the template did to the value."""
    derived = DERIVED_SECRETS.set(call.secret_fields) if call.secret_fields else None
    try:
        return await ctx.call(call.target, arguments)
    except Exception as error:
        logger.warning("inner call to %s raised %s", call.target, type(error).__name__, exc_info=True)
        message = f"the call to {call.target} raised {type(error).__name__}: {error}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)
    finally:
        if derived is not None:
            DERIVED_SECRETS.reset(derived)


async def call_with_retry(
    ctx: RunContext, call: ToolCallPlan, arguments: dict[str, Any], attempts: list[int]
) -> types.CallToolResult:
    """Call until a result is not `isError` or the retries are spent; `attempts[0]` counts calls made."""
    while True:
        attempts[0] += 1
        result = await call_once(ctx, call, arguments)
        if not result.is_error or attempts[0] > call.retry.retries:
            return result
        await asyncio.sleep(call.retry.delay_before(attempts[0]))


async def run_call(
    ctx: RunContext, call: ToolCallPlan, context: Mapping[str, Any], timeout: float | None
) -> StepOutcome:
    """Render, call (with retries) under `timeout`, and turn the result into an outcome."""
    try:
        arguments = await run_bounded(render_arguments, call, context)
    except TemplateError as error:
        return failed(str(error))
    attempts = [0]
    try:
        async with asyncio.timeout(timeout):
            result = await call_with_retry(ctx, call, arguments, attempts)
    except TimeoutError:
        return failed(f"timed out after {_seconds(timeout)} (attempt {attempts[0]})", attempts[0])
    if result.is_error:  # a backend may echo what it got: the derived secret values are hidden too
        derived = secret_values(call.secret_fields, arguments)
        return failed(redact_text(error_text(result), derived), attempts[0])
    content = [item.model_dump(by_alias=True, mode="json", exclude_none=True) for item in result.content]
    return StepOutcome(
        "completed", output=step_output(result), result=result, attempts=attempts[0], content=content
    )


def _seconds(value: float | None) -> str:
    if value is None:
        return "no limit"
    return f"{value:g}s" if value >= 1 or value == 0 else f"{round(value * 1000)}ms"


# -- elicitation --------------------------------------------------------------------


async def run_elicitation(ctx: RunContext, step: StepPlan, context: Mapping[str, Any]) -> StepOutcome:
    """Ask the user; the answer, a refusal or silence decide the step per onDecline/onCancel.

    As in ToolHive, a timeout counts as a cancel, except that a step with a
    `defaultResponse` takes that answer instead. A client that cannot be
    asked gets the `defaultResponse` too, or a clear failure.
    """
    plan = step.elicit
    assert plan is not None
    try:
        message = await run_bounded(plan.message.render_text, context)
    except TemplateError as error:
        return failed(f"message: {error}")
    try:
        if ctx.elicit is None:
            raise ElicitUnavailable("the gateway has no way to ask this client")
        async with asyncio.timeout(plan.timeout):
            answer = await ctx.elicit(message, plan.schema, plan.timeout)
    except ElicitUnavailable as error:
        return _unavailable(plan, str(error))
    except TimeoutError:
        if plan.has_default:
            return _accepted(plan, copy_json(plan.default_response), defaulted="timeout")
        return _refused(plan.on_cancel, "timeout", f"no answer within {_seconds(plan.timeout)}")
    except Exception as error:
        logger.warning("elicitation failed", exc_info=True)
        return failed(f"asking the user failed: {type(error).__name__}: {error}")
    if answer.action == "accept":
        return _accept(plan, answer.content)
    if answer.action == "decline":
        return _refused(plan.on_decline, "decline", "the user declined")
    return _refused(plan.on_cancel, "cancel", "the user cancelled")


def _unavailable(plan: ElicitPlan, detail: str) -> StepOutcome:
    if plan.has_default:
        return _accepted(plan, copy_json(plan.default_response), defaulted="unavailable")
    return failed(
        f"this step asks the user a question, but the client cannot answer elicitation requests ({detail}); "
        "use a client with elicitation support or give the step a defaultResponse"
    )


def _accept(plan: ElicitPlan, content: dict[str, Any] | None) -> StepOutcome:
    answer = content or {}
    errors = sorted(plan.validator.iter_errors(answer), key=lambda error: list(error.absolute_path))
    if errors:
        where = "/".join(str(part) for part in errors[0].absolute_path) or "answer"
        return failed(
            f"the answer does not match the requested schema ({where}: {errors[0].validator} check)"
        )
    value = answer.get(ELICIT_VALUE_KEY) if plan.wrapped else answer
    return _accepted(plan, value)


def _accepted(plan: ElicitPlan, value: Any, defaulted: str | None = None) -> StepOutcome:
    output: dict[str, Any] = {"action": "accept", "content": value}
    if defaulted:
        output["defaulted"] = defaulted
    return StepOutcome("completed", output=output, reason="accept")


def _refused(action: str, how: str, text: str) -> StepOutcome:
    if action == "continue":
        return StepOutcome("completed", output={"action": how}, reason=how)
    if action == "skip_remaining":
        return StepOutcome(
            "completed", output={"action": how, "skipped": True}, reason=how, skip_remaining=True
        )
    return failed(f"{text}; the workflow stops here (onDecline/onCancel: abort)")


# -- forEach ------------------------------------------------------------------------


class _IterationFailed(Exception):
    pass


def collection_items(plan: ForEachPlan, context: Mapping[str, Any]) -> list[Any]:
    """The items to iterate: a list, or JSON text of one (ToolHive's `{{json ...}}` idiom)."""
    value = plan.collection.render(context)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise TemplateError("collection must resolve to an array (the text is not JSON)") from None
    if not isinstance(value, list):
        raise TemplateError(f"collection must resolve to an array (got {_kind(value)})")
    if len(value) > plan.max_iterations:
        raise TemplateError(
            f"collection has {len(value)} items, more than maxIterations ({plan.max_iterations})"
        )
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a scalar"
    )


async def run_for_each(ctx: RunContext, step: StepPlan, context: Mapping[str, Any]) -> StepOutcome:
    """Run the inner step once per item, at most `maxParallel` at a time.

    Without `onError: continue` the first failed iteration cancels the rest
    and fails the step; with it, every iteration runs and the step completes
    with the failures counted (ToolHive's semantics).
    """
    plan = step.for_each
    assert plan is not None
    try:
        items = await run_bounded(collection_items, plan, context)
    except TemplateError as error:
        return failed(f"collection: {error}")
    results: list[dict[str, Any] | None] = [None] * len(items)
    gate = asyncio.Semaphore(plan.max_parallel)
    stop = asyncio.Event()

    async def iterate(position: int, item: Any) -> None:
        async with gate:
            if stop.is_set():
                return
            item_context = _item_context(context, plan, position, item)
            outcome = await run_call(ctx, plan.call, item_context, plan.call.timeout)
            results[position] = _iteration(position, item, outcome)
            if outcome.status == "failed" and not plan.continue_on_error:
                stop.set()
                raise _IterationFailed(f"iteration {position} failed: {outcome.error}")

    tasks = [asyncio.create_task(iterate(position, item)) for position, item in enumerate(items)]
    try:
        await asyncio.gather(*tasks)
    except _IterationFailed as error:
        await _cancel(tasks)
        output = _for_each_output(items, results)
        return StepOutcome("failed", output=output, error=str(error), attempts=1)
    finally:
        await _cancel(tasks)
    return StepOutcome("completed", output=_for_each_output(items, results), attempts=1)


def _item_context(context: Mapping[str, Any], plan: ForEachPlan, position: int, item: Any) -> dict[str, Any]:
    return {
        **context,
        plan.item_var: item,
        "index": position,
        "forEach": {plan.item_var: item, "index": position},
    }


def _iteration(position: int, item: Any, outcome: StepOutcome) -> dict[str, Any]:
    return {
        "index": position,
        "item": item,
        "status": outcome.status,
        "output": outcome.output if outcome.status == "completed" else None,
        "error": outcome.error,
    }


def _for_each_output(items: list[Any], results: list[dict[str, Any] | None]) -> dict[str, Any]:
    iterations = [
        found
        if found is not None
        else {"index": position, "item": item, "status": "cancelled", "output": None, "error": None}
        for position, (item, found) in enumerate(zip(items, results, strict=True))
    ]
    return {
        "iterations": iterations,
        "count": len(items),
        "completed": sum(1 for entry in iterations if entry["status"] == "completed"),
        "failed": sum(1 for entry in iterations if entry["status"] == "failed"),
    }


async def _cancel(tasks: list[asyncio.Task[Any]]) -> None:
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
