"""In-memory catalog and backend for workflow engine tests.

The backend records an ordered event log (`start`/`end`/`cancel` per call),
so tests assert overlap and ordering from the log, never from wall-clock
thresholds. These are unit tests of the engine: every inner call goes
through `RunContext.call`, exactly as the gateway's executor would route it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from toolweave.composite.base import ResolvedTool, RunContext
from toolweave.composite.workflow import WorkflowComposite, build_workflow
from toolweave.config import WorkflowDef
from toolweave.results import text

SEP = "__"


def exposed(reference: str) -> str:
    for sep in ("/", "."):
        backend, found, name = reference.partition(sep)
        if found and backend and name:
            return f"{backend}{SEP}{name}"
    return reference


class Catalog:
    """A ToolResolver: `backend/tool`, `backend.tool` or exposed names → tools registered with `add`."""

    def __init__(self) -> None:
        self.tools: dict[str, ResolvedTool] = {}

    def add(
        self,
        reference: str,
        properties: Mapping[str, Any] | None = None,
        *,
        read_only: bool | None = None,
        destructive: bool | None = None,
        idempotent: bool | None = None,
        composite: str | None = None,
        references: Iterable[str] = (),
    ) -> Catalog:
        name = exposed(reference)
        annotations = (
            types.ToolAnnotations(
                read_only_hint=read_only, destructive_hint=destructive, idempotent_hint=idempotent
            )
            if read_only is not None or destructive is not None or idempotent is not None
            else None
        )
        tool = types.Tool(
            name=name,
            input_schema={"type": "object", "properties": dict(properties or {})},
            annotations=annotations,
        )
        backend = None if composite else name.split(SEP, 1)[0]
        self.tools[name] = ResolvedTool(name, tool, backend, composite, frozenset(references))
        return self

    def resolve(self, reference: str) -> ResolvedTool | None:
        return self.tools.get(reference) or self.tools.get(exposed(reference))


Answer = types.CallToolResult | dict[str, Any] | str | BaseException


def as_result(answer: Answer) -> types.CallToolResult:
    if isinstance(answer, BaseException):
        raise answer
    if isinstance(answer, types.CallToolResult):
        return answer
    if isinstance(answer, dict):
        return types.CallToolResult(content=[text("structured")], structured_content=answer)
    return types.CallToolResult(content=[text(answer)])


def error(message: str = "boom") -> types.CallToolResult:
    return types.CallToolResult(content=[text(message)], is_error=True)


@dataclass
class Backend:
    """A CallFn: answers per exposed tool name, sleeps per tool, logs events in order."""

    answers: dict[str, Answer | Callable[[dict[str, Any]], Answer] | list[Answer]] = field(
        default_factory=dict
    )
    delays: dict[str, float] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)
    active: int = 0
    max_active: int = 0

    async def __call__(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        self.calls.append((name, dict(arguments)))
        self.events.append(("start", name))
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(self.delays.get(name, 0))
            result = as_result(self._answer(name, arguments))
        except asyncio.CancelledError:
            self.events.append(("cancel", name))
            raise
        finally:
            self.active -= 1
        self.events.append(("end", name))
        return result

    def _answer(self, name: str, arguments: dict[str, Any]) -> Answer:
        found = self.answers.get(name, f"{name} ok")
        if isinstance(found, list):
            return found.pop(0) if len(found) > 1 else found[0]
        if callable(found) and not isinstance(found, BaseException):
            return found(arguments)
        return found

    def context(self, **extra: Any) -> RunContext:
        return RunContext(call=self, **extra)

    def position(self, kind: str, name: str) -> int:
        return self.events.index((kind, name))

    def overlapped(self, first: str, second: str) -> bool:
        """Both calls were in flight at the same time (each started before the other ended)."""
        return self.position("start", first) < self.position("end", second) and self.position(
            "start", second
        ) < self.position("end", first)

    def called(self) -> list[str]:
        return [name for name, _ in self.calls]


def definition(steps: list[dict[str, Any]], **fields: Any) -> WorkflowDef:
    data: dict[str, Any] = {"name": "wf", "description": "A test workflow", "steps": steps, **fields}
    return WorkflowDef.model_validate(data)


def build(steps: list[dict[str, Any]], catalog: Catalog, **fields: Any) -> WorkflowComposite:
    defn = definition(steps, **fields)
    assert defn.static_issues() == [], defn.static_issues()
    return build_workflow(defn, catalog)


def params(*names: str, **schemas: Mapping[str, Any]) -> dict[str, Any]:
    """A parameters schema declaring `names` (any type) and `schemas` (given property schemas)."""
    properties: dict[str, Any] = {name: {} for name in names}
    properties.update({name: dict(schema) for name, schema in schemas.items()})
    return {"type": "object", "properties": properties}


def catalog_for(*references: str, **schemas: Mapping[str, Any]) -> Catalog:
    """A catalog with each reference as a tool; `schemas` maps exposed names to their properties."""
    catalog = Catalog()
    for reference in references:
        catalog.add(reference, schemas.get(exposed(reference)))
    return catalog


def texts(result: types.CallToolResult) -> list[str]:
    return [item.text for item in result.content if isinstance(item, types.TextContent)]


def meta(result: types.CallToolResult) -> dict[str, Any]:
    found = (result.meta or {}).get("toolweave")
    assert isinstance(found, dict)
    return found


def statuses(result: types.CallToolResult) -> dict[str, str]:
    return {step["id"]: step["status"] for step in meta(result)["steps"]}
