"""Fakes for tests of one piece alone (the real thing runs everywhere else): a backend with a
fixed tool list, an in-memory catalog (a `ToolResolver`), and a recording call function (a `CallFn`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from toolweave.backends.base import Backend
from toolweave.composite.base import ResolvedTool, RunContext
from toolweave.results import text

SEP = "__"


class FakeBackend(Backend):
    """A connected backend with a fixed tool list, for catalog tests that need no process."""

    def __init__(self, backend_config: Any, tools: list[types.Tool]) -> None:
        super().__init__(backend_config)
        self.tools = list(tools)
        self.status = "connected"
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def start(self) -> None:
        self._ready.set()

    async def stop(self) -> None:
        self._set_status("stopped")

    async def call_tool(self, name: str, arguments: dict[str, Any], **_: Any) -> types.CallToolResult:
        self.calls.append((name, arguments))
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{self.name}:{name}")])


def tool(
    name: str,
    properties: Mapping[str, Any] | None = None,
    required: Iterable[str] = (),
    *,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    description: str | None = None,
    output_schema: dict[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> types.Tool:
    """A tool as a backend lists it."""
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties or {})}
    if required:
        schema["required"] = list(required)
    schema.update(extra or {})
    hints = (read_only, destructive, idempotent, open_world)
    annotations = (
        types.ToolAnnotations(
            read_only_hint=read_only,
            destructive_hint=destructive,
            idempotent_hint=idempotent,
            open_world_hint=open_world,
        )
        if any(hint is not None for hint in hints)
        else None
    )
    return types.Tool(
        name=name,
        description=description,
        input_schema=schema,
        annotations=annotations,
        output_schema=output_schema,
    )


def exposed(reference: str) -> str:
    """`backend/tool` or `backend.tool` → `backend__tool`; an exposed name stays as it is."""
    for sep in ("/", "."):
        backend, found, name = reference.partition(sep)
        if found and backend and name:
            return f"{backend}{SEP}{name}"
    return reference


class FakeCatalog:
    """A ToolResolver over tools given at construction (exposed names) or `add`ed by reference;
    composites are registered by kind (`composites[name] = "router"`). Records every lookup."""

    def __init__(self, tools: Iterable[types.Tool] = (), composites: Mapping[str, str] | None = None) -> None:
        self.tools: dict[str, types.Tool] = {t.name: t for t in tools}
        self.composites: dict[str, str] = dict(composites or {})
        self.references: dict[str, frozenset[str]] = {}
        """For composites: the exposed names they call (cycle detection)."""
        self.lookups: list[str] = []

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
    ) -> FakeCatalog:
        name = exposed(reference)
        self.tools[name] = tool(
            name, properties, read_only=read_only, destructive=destructive, idempotent=idempotent
        )
        if composite:
            self.composites[name] = composite
        self.references[name] = frozenset(references)
        return self

    def resolve(self, reference: str) -> ResolvedTool | None:
        self.lookups.append(reference)
        name = reference if reference in self.tools else exposed(reference)
        found = self.tools.get(name)
        if found is None:
            return None
        kind = self.composites.get(name)
        backend = None if kind else name.split(SEP, 1)[0]
        return ResolvedTool(name, found, backend, kind, self.references.get(name, frozenset()))

    def names_like(self, reference: str) -> list[str]:
        return list(self.tools)


Answer = types.CallToolResult | dict[str, Any] | str | BaseException
Responder = Callable[[str, dict[str, Any]], Answer]


def echo(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[text(f"{name}:{sorted(arguments.items())}")])


def ok(name: str, _arguments: dict[str, Any]) -> str:
    return f"{name} ok"


def as_result(answer: Answer) -> types.CallToolResult:
    if isinstance(answer, BaseException):
        raise answer
    if isinstance(answer, types.CallToolResult):
        return answer
    if isinstance(answer, dict):
        return types.CallToolResult(content=[text("structured")], structured_content=answer)
    return types.CallToolResult(content=[text(answer)])


@dataclass
class FakeCalls:
    """A CallFn (a composite's way to call a tool) that records calls and events in order, sleeps per
    tool (to show overlap) and answers per tool.

    An answer is a result, a dict (structured content), a text, an exception (raised), a
    callable of the arguments, or a list of those (one per call, the last repeated);
    `responders` take `(name, arguments)`; anything else gets `default`.
    """

    answers: dict[str, Answer | Callable[[dict[str, Any]], Answer] | list[Answer]] = field(
        default_factory=dict
    )
    responders: dict[str, Responder] = field(default_factory=dict)
    delays: dict[str, float] = field(default_factory=dict)
    default: Responder = ok
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    active: int = 0
    max_active: int = 0
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        self.calls.append((name, dict(arguments)))
        self.events.append(("start", name))
        self.started.append(name)
        self._changed.set()
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            delay = self.delays.get(name, 0.0)
            if delay:
                await asyncio.sleep(delay)
            result = as_result(self._answer(name, arguments))
        except asyncio.CancelledError:
            self.events.append(("cancel", name))
            self.cancelled.append(name)
            raise
        finally:
            self.active -= 1
        self.events.append(("end", name))
        self.finished.append(name)
        return result

    def _answer(self, name: str, arguments: dict[str, Any]) -> Answer:
        if name in self.responders:
            return self.responders[name](name, arguments)
        found = self.answers.get(name)
        if found is None:
            return self.default(name, arguments)
        if isinstance(found, list):
            return found.pop(0) if len(found) > 1 else found[0]
        if callable(found) and not isinstance(found, BaseException):
            return found(arguments)
        return found

    async def wait_started(self, count: int) -> None:
        """Until `count` calls have started (no polling, no sleeps)."""
        while len(self.started) < count:
            self._changed.clear()
            await self._changed.wait()

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


def failing(message: str = "boom") -> Responder:
    def respond(_name: str, _arguments: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(content=[text(message)], is_error=True)

    return respond


def structured(data: dict[str, Any], message: str = "ok") -> Responder:
    def respond(_name: str, _arguments: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(content=[text(message)], structured_content=data)

    return respond
