"""Running a fan-out: one call sent to many backend tools, results aggregated.

Strategies:

- `parallel` (default): every target at once; the call takes as long as
  the slowest target (or its timeout), not the sum.
- `sequential`: one after another in declared order; a failure does not stop
  the rest.
- `first_success`: every target at once; the first successful result is
  returned and the other targets are cancelled. When all fail, the result is
  an error holding every failure.

Each target's `timeout` (else the definition's) turns a slow target into an
error item `timed out after Xs`. Cancelling the call cancels its targets: they
run in an `asyncio.TaskGroup`, so none outlives `run`.

Arguments: the short form (`tools = [...]`) and targets without `arguments`
receive the call's arguments as they are. A target with `arguments` receives
those instead, rendered per call with the shared sandboxed Jinja2 templates:
the context holds every call argument by name and all of them as `params` /
`arguments`; a string that is exactly one `{{ expr }}` keeps its native type;
rendered text is coerced to the type the target's schema asks for.

Result (docs/composites.md): ONE text item holding every shown target's text under a
heading naming its tool (clients that keep only a result's first item, smolagents among
them, still see every target), then the targets' non-text items (images, resources) in
the same order; `isError` when any target failed (successful results kept);
`structuredContent = {results: [{tool, isError, structuredContent, text?}]}`, `text` only
for a target that gave no structured result (its text is not repeated otherwise);
`_meta["toolweave"] = {kind: "fanout", targets: [{tool, isError, latency_ms, status}]}`
with `status` one of `completed`, `failed`, `timed_out`, `cancelled`.

A recorded call also gets one step per target in its run record (`RunContext.steps`): the
target's status, start and latency, its structured result (else its text) or its error, so
the run's page shows what each target answered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import mcp_types as types

from toolweave.common_types import ProgressFn
from toolweave.composite.base import ResolvedTool, RunContext
from toolweave.results import META_KEY, text
from toolweave.runs import StepRecord
from toolweave.schemas.coerce import coerce
from toolweave.templates import TemplateError, ValueTemplate, run_bounded

KIND: Final = "fanout"
MAX_RECORDED_TEXT: Final = 20_000
"""A target's text kept in its run record's step, at most (characters)."""
Status = Literal["completed", "failed", "timed_out", "cancelled"]

OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "tool": {"type": "string"},
                    "isError": {"type": "boolean"},
                    # typed, not `{}` (strict checkers refuse an empty schema), and `anyOf`, not a type
                    # list: the MCP Inspector's --strict mode warns on `type: ["object", "null"]`
                    "structuredContent": {
                        "anyOf": [{"type": "object"}, {"type": "null"}],
                        "description": "The tool's own structured result; null when it gave none",
                    },
                    "text": {
                        "type": "string",
                        "description": "The tool's text, when it gave no structured result",
                    },
                },
                "required": ["tool", "isError", "structuredContent"],
            },
        }
    },
    "required": ["results"],
}
"""What `structuredContent` of every fan-out result looks like (errors included)."""


# -- running ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """One target, ready to call."""

    index: int
    resolved: ResolvedTool
    arguments: ValueTemplate | None
    """None forwards the call's arguments; else rendered per call."""
    timeout: float | None

    @property
    def name(self) -> str:
        return self.resolved.name

    def call_arguments(self, arguments: dict[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
        """What this target is called with; raises TemplateError when its templates cannot render."""
        if self.arguments is None:
            return dict(arguments)
        rendered = coerce(self.arguments.render(context), self.resolved.tool.input_schema)
        if not isinstance(rendered, dict):
            raise TemplateError("the arguments template did not render to an object")
        return rendered


@dataclass(slots=True)
class Outcome:
    target: Target
    result: types.CallToolResult
    latency_ms: float
    status: Status
    started: float | None = None
    """When the target's call began (`time.perf_counter()`); None for one cancelled before it ended."""


class _FirstSuccess(Exception):
    """Raised inside the task group to cancel the remaining targets once one succeeded."""


@dataclass(slots=True)
class _Progress:
    """Reports `done / total` as targets finish; a failing progress channel never fails the call."""

    report: ProgressFn | None
    total: int
    done: int = field(default=0)

    async def finished(self, outcome: Outcome) -> None:
        self.done += 1
        if self.report is None:
            return
        try:
            await self.report(float(self.done), float(self.total), f"{outcome.target.name} {outcome.status}")
        except Exception:  # noqa: BLE001 - progress is best effort; the results matter, not the notification
            return


@dataclass(slots=True)
class FanoutComposite:
    """A built fan-out; `run` is the per-call path."""

    name: str
    tool: types.Tool
    references: frozenset[str]
    targets: tuple[Target, ...]
    strategy: Literal["parallel", "sequential", "first_success"]
    order: Literal["completion", "declared"]
    templated: bool
    kind: str = KIND

    async def run(self, arguments: Mapping[str, Any], ctx: RunContext) -> types.CallToolResult:
        began = time.perf_counter()
        args = dict(arguments) if isinstance(arguments, Mapping) else {}
        context = arguments_context(args) if self.templated else {}
        progress = _Progress(ctx.progress, len(self.targets))
        if self.strategy == "sequential":
            outcomes = [await self._finish(target, args, context, ctx, progress) for target in self.targets]
        else:
            outcomes = await self._concurrently(args, context, ctx, progress)
        result = self._aggregate(outcomes)
        if ctx.steps is not None:
            ctx.steps.extend(self._steps(outcomes, began))
        return result

    def _steps(self, outcomes: list[Outcome], began: float) -> list[StepRecord]:
        """One run-record step per target, in declared order; a tool named twice gets `#2`, `#3`..."""
        by_index = {outcome.target.index: outcome for outcome in outcomes}
        seen: dict[str, int] = {}
        steps = []
        for target in self.targets:
            seen[target.name] = seen.get(target.name, 0) + 1
            step_id = target.name if seen[target.name] == 1 else f"{target.name} #{seen[target.name]}"
            steps.append(_step(step_id, by_index.get(target.index), began))
        return steps

    async def _finish(
        self,
        target: Target,
        args: dict[str, Any],
        context: Mapping[str, Any],
        ctx: RunContext,
        progress: _Progress,
    ) -> Outcome:
        outcome = await call_target(target, args, context, ctx)
        await progress.finished(outcome)
        return outcome

    async def _concurrently(
        self, args: dict[str, Any], context: Mapping[str, Any], ctx: RunContext, progress: _Progress
    ) -> list[Outcome]:
        outcomes: list[Outcome] = []
        stop_on_success = self.strategy == "first_success"

        async def one(target: Target) -> None:
            outcome = await call_target(target, args, context, ctx)
            outcomes.append(outcome)
            await progress.finished(outcome)
            if stop_on_success and not outcome.result.is_error:
                raise _FirstSuccess

        try:
            async with asyncio.TaskGroup() as group:
                for target in self.targets:
                    group.create_task(one(target))
        except* _FirstSuccess:
            pass
        return outcomes

    def _aggregate(self, outcomes: list[Outcome]) -> types.CallToolResult:
        if self.order == "declared":
            outcomes.sort(key=lambda outcome: outcome.target.index)
        shown = outcomes
        if self.strategy == "first_success":
            winner = next((o for o in outcomes if not o.result.is_error), None)
            shown = [winner] if winner is not None else outcomes
        finished = {outcome.target.index for outcome in outcomes}
        cancelled = [
            Outcome(t, types.CallToolResult(content=[]), 0.0, "cancelled")
            for t in self.targets
            if t.index not in finished
        ]
        return types.CallToolResult(
            content=_content(shown),
            structured_content={"results": [_result_entry(outcome) for outcome in shown]},
            is_error=any(outcome.result.is_error for outcome in shown),
            _meta={META_KEY: {"kind": KIND, "targets": [_meta_entry(o) for o in [*outcomes, *cancelled]]}},
        )


def _heading(outcome: Outcome) -> str:
    return f"## {outcome.target.name}" + (" (failed)" if outcome.result.is_error else "")


def _text_of(result: types.CallToolResult) -> str:
    return "\n".join(item.text for item in result.content if isinstance(item, types.TextContent))


def _content(shown: list[Outcome]) -> list[Any]:
    """One text item: each target's heading and text; then every non-text item, in target order."""
    sections = []
    for outcome in shown:
        body = _text_of(outcome.result)
        sections.append(f"{_heading(outcome)}\n{body}" if body else _heading(outcome))
    others = [
        item
        for outcome in shown
        for item in outcome.result.content
        if not isinstance(item, types.TextContent)
    ]
    return [text("\n\n".join(sections)), *others] if sections else others


def _result_entry(outcome: Outcome) -> dict[str, Any]:
    result = outcome.result
    entry: dict[str, Any] = {
        "tool": outcome.target.name,
        "isError": result.is_error,
        "structuredContent": result.structured_content,
    }
    if result.structured_content is None:
        entry["text"] = _text_of(result)
    return entry


def _meta_entry(outcome: Outcome) -> dict[str, Any]:
    return {
        "tool": outcome.target.name,
        "isError": outcome.result.is_error,
        "latency_ms": outcome.latency_ms,
        "status": outcome.status,
    }


def _step(step_id: str, outcome: Outcome | None, began: float) -> StepRecord:
    if outcome is None:  # first_success: cancelled once another target succeeded
        return StepRecord(id=step_id, status="cancelled", error="cancelled: another target succeeded first")
    result = outcome.result
    body = _text_of(result)
    output: Any = result.structured_content
    if output is None and not result.is_error:
        output = body[:MAX_RECORDED_TEXT]
    return StepRecord(
        id=step_id,
        status=outcome.status,
        attempts=1,
        latency_ms=outcome.latency_ms,
        output=output,
        error=(body[:MAX_RECORDED_TEXT] or "error") if result.is_error else None,
        start_ms=round((outcome.started - began) * 1000, 3) if outcome.started is not None else None,
    )


def arguments_context(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """What argument templates see: each call argument by name, and all of them as `params` / `arguments`."""
    plain = dict(arguments)
    return {**plain, "params": plain, "arguments": plain}


async def call_target(
    target: Target, args: dict[str, Any], context: Mapping[str, Any], ctx: RunContext
) -> Outcome:
    """Call one target; every failure becomes an error result (cancellation still propagates)."""
    started = time.perf_counter()
    try:
        call_args = await run_bounded(target.call_arguments, args, context)
    except TemplateError as error:
        failure = _error(f"cannot build the arguments for {target.name}: {error}")
        return Outcome(target, failure, _elapsed_ms(started), "failed", started)
    status: Status = "completed"
    try:
        result = await _call_with_timeout(target, call_args, ctx)
    except _TargetTimedOut:
        result = _error(f"timed out after {target.timeout:g}s")
        status = "timed_out"
    except Exception as error:  # noqa: BLE001 - a broken call is this target's error item, not a crash
        result = _error(f"calling {target.name} failed: {error or type(error).__name__}")
    if status == "completed" and result.is_error:
        status = "failed"
    return Outcome(target, result, _elapsed_ms(started), status, started)


class _TargetTimedOut(Exception):
    """This target's own timeout expired (as opposed to a TimeoutError from inside the call)."""


async def _call_with_timeout(
    target: Target, call_args: dict[str, Any], ctx: RunContext
) -> types.CallToolResult:
    if target.timeout is None:
        return await ctx.call(target.name, call_args)
    scope = asyncio.timeout(target.timeout)
    try:
        async with scope:
            return await ctx.call(target.name, call_args)
    except TimeoutError:
        if scope.expired():
            raise _TargetTimedOut from None
        raise


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[text(message)], is_error=True)


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
