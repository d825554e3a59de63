"""Fakes for composite unit tests: a catalog (ToolResolver) and a backend (CallFn) in memory.

These exercise the composite logic alone; end-to-end tests with real MCP
backends live with the gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from toolweave.composite.base import ResolvedTool, RunContext
from toolweave.config import ConfigError, parse_config
from toolweave.results import text

SEP = "__"


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
    """A backend tool as the catalog lists it (exposed name `backend__tool`)."""
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


class FakeCatalog:
    """A ToolResolver over a fixed set of tools; composites can be registered by kind."""

    def __init__(self, tools: Iterable[types.Tool] = (), composites: Mapping[str, str] | None = None) -> None:
        self.tools = {t.name: t for t in tools}
        self.composites = dict(composites or {})
        self.lookups: list[str] = []

    def resolve(self, reference: str) -> ResolvedTool | None:
        self.lookups.append(reference)
        name = self._exposed(reference)
        found = self.tools.get(name)
        if found is None:
            return None
        kind = self.composites.get(name)
        backend = None if kind else name.split(SEP, 1)[0]
        return ResolvedTool(name=name, tool=found, backend=backend, composite_kind=kind)

    def _exposed(self, reference: str) -> str:
        if reference in self.tools:
            return reference
        for sep in ("/", "."):
            backend, found, name = reference.partition(sep)
            if found and backend and name:
                return f"{backend}{SEP}{name}"
        return reference


Responder = Callable[[str, dict[str, Any]], types.CallToolResult]


def echo(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[text(f"{name}:{sorted(arguments.items())}")])


@dataclass
class FakeBackend:
    """A CallFn that records calls, sleeps per tool (to show overlap) and answers per tool."""

    delays: dict[str, float] = field(default_factory=dict)
    responders: dict[str, Responder] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    active: int = 0
    max_active: int = 0
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        self.calls.append((name, dict(arguments)))
        self.started.append(name)
        self._changed.set()
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            delay = self.delays.get(name, 0.0)
            if delay:
                await asyncio.sleep(delay)
            responder = self.responders.get(name, echo)
            result = responder(name, arguments)
        except asyncio.CancelledError:
            self.cancelled.append(name)
            raise
        finally:
            self.active -= 1
        self.finished.append(name)
        return result

    async def wait_started(self, count: int) -> None:
        """Until `count` calls have started (no polling, no sleeps)."""
        while len(self.started) < count:
            self._changed.clear()
            await self._changed.wait()

    def context(self, **extra: Any) -> RunContext:
        return RunContext(call=self, **extra)


def failing(message: str = "boom") -> Responder:
    def respond(_name: str, _arguments: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(content=[text(message)], is_error=True)

    return respond


def structured(data: dict[str, Any], message: str = "ok") -> Responder:
    def respond(_name: str, _arguments: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(content=[text(message)], structured_content=data)

    return respond


def backends_for(*names: str) -> list[dict[str, Any]]:
    return [{"name": name, "python": "tests.none"} for name in names]


def parse_composite_def(definition: dict[str, Any], backends: Iterable[str] | None = None) -> Any:
    """Validate one composite definition through the real config loader; return its model."""
    names = backends if backends is not None else _backends_in(definition)
    config = parse_config({"backends": backends_for(*names), "composite_tools": [definition]})
    assert config is not None
    return config.composite_tools[0]


def config_issues(definition: dict[str, Any], backends: Iterable[str] | None = None) -> list[str]:
    """Every problem the loader reports for one definition (as `path: message`)."""
    names = backends if backends is not None else _backends_in(definition)
    try:
        parse_config({"backends": backends_for(*names), "composite_tools": [definition]})
    except ConfigError as error:
        return [str(issue) for issue in error.issues]
    return []


def _backends_in(definition: dict[str, Any]) -> list[str]:
    references: list[str] = [ref for ref in definition.get("tools", []) if isinstance(ref, str)]
    for key in ("operations", "targets"):
        references += [
            item["tool"] for item in definition.get(key, []) if isinstance(item, dict) and "tool" in item
        ]
    names = []
    for ref in references:
        for sep in ("/", "."):
            if sep in ref:
                names.append(ref.split(sep, 1)[0])
                break
    return list(dict.fromkeys(names))


def texts(result: types.CallToolResult) -> list[str]:
    return [item.text for item in result.content if isinstance(item, types.TextContent)]


def meta(result: types.CallToolResult) -> dict[str, Any]:
    found = (result.meta or {}).get("toolweave")
    assert isinstance(found, dict)
    return found
