"""In-process Python backends: a module of functions marked with `@toolweave.tool`.

The input schema comes from the type hints (through pydantic), the
description and parameter docs from the docstring, and MCP annotations from
the decorator's arguments. Sync functions run in a worker thread so a slow
one cannot stall the gateway's event loop.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, overload

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from toolweave.backends.base import Backend
from toolweave.config.models import BackendConfig
from toolweave.results import error_result, json_text, text

F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__toolweave_tool__"


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    annotations: types.ToolAnnotations | None
    function: Callable[..., Any]
    model: type[BaseModel]

    def definition(self) -> types.Tool:
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        return types.Tool(
            name=self.name, description=self.description, input_schema=schema, annotations=self.annotations
        )


@overload
def tool(function: F) -> F: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    title: str | None = None,
) -> Callable[[F], F]: ...


def tool(
    function: F | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    title: str | None = None,
) -> F | Callable[[F], F]:
    """Mark a function as a tool of an in-process backend (`python = "my.module"`)."""

    def mark(fn: F) -> F:
        annotations = tool_annotations(read_only, destructive, idempotent, open_world, title)
        setattr(fn, _MARK, tool_spec(fn, name, description, annotations))
        return fn

    return mark(function) if function is not None else mark


def tool_annotations(
    read_only: bool | None,
    destructive: bool | None,
    idempotent: bool | None,
    open_world: bool | None,
    title: str | None,
) -> types.ToolAnnotations | None:
    """A decorator's hints as MCP annotations; None when it gave none."""
    if all(hint is None for hint in (read_only, destructive, idempotent, open_world, title)):
        return None
    return types.ToolAnnotations(
        title=title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=open_world,
    )


def tool_spec(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    annotations: types.ToolAnnotations | None,
) -> ToolSpec:
    """What a decorated function is as a tool: name (else the function's), description (else
    its docstring's summary), parameter docs from the docstring, input schema from the type hints.

    The one reading of a function as a tool, for `@tool` and the federated `@federated_tool` alike.
    """
    summary, param_docs = _parse_docstring(inspect.getdoc(fn) or "")
    return ToolSpec(
        name=name or fn.__name__,
        description=description or summary,
        annotations=annotations,
        function=fn,
        model=_arguments_model(fn, param_docs),
    )


def _arguments_model(fn: Callable[..., Any], docs: dict[str, str]) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        annotation = parameter.annotation if parameter.annotation is not inspect.Parameter.empty else Any
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (annotation, Field(default, description=docs.get(parameter.name)))
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    # `__module__` lets pydantic resolve string annotations (`from __future__ import annotations`)
    # against the tool's own module, including types defined after the function
    return create_model(f"{fn.__name__}_arguments", __config__=config, __module__=fn.__module__, **fields)


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?):\s*$")
_PARAM = re.compile(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Google-style docstring → (description, {param: doc})."""
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        header = _SECTION.match(line.strip())
        if header and not line.startswith(" "):
            section, current = header.group(1), None
            continue
        if section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters"):
            match = _PARAM.match(line)
            if match:
                current = match.group(1)
                params[current] = match.group(2).strip()
            elif current and line.strip():
                params[current] += " " + line.strip()
    return "\n".join(summary).strip(), params


def tools_of(module: Any) -> list[ToolSpec]:
    """The decorated functions of a module, in definition order."""
    specs = [getattr(value, _MARK) for value in vars(module).values() if hasattr(value, _MARK)]
    return specs


def import_beside(name: str, base_dir: Path | None) -> Any:
    """Import module `name`; one that is not importable but sits in `base_dir` (the config's folder,
    `mymodule.py` or a `mymodule/` package) is imported from there, that folder then added to the
    end of `sys.path` (so it never shadows an installed module). Else the error says where it looked."""
    top = name.split(".", 1)[0]
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name != top or base_dir is None:
            raise
        folder = str(base_dir.resolve())
        if not (base_dir / f"{top}.py").is_file() and not (base_dir / top).is_dir():
            raise ModuleNotFoundError(
                f"No module named {top!r} on the Python path nor in the config's folder {folder}; "
                "put it there, install it, or add its folder to PYTHONPATH",
                name=top,
            ) from None
    if folder not in sys.path:
        sys.path.append(folder)
    importlib.invalidate_caches()
    return importlib.import_module(name)


class PythonBackend(Backend):
    """Functions of an importable module, called in-process (no serialisation hop)."""

    def __init__(self, config: BackendConfig, *, base_dir: Path | None = None) -> None:
        super().__init__(config)
        self._specs: dict[str, ToolSpec] = {}
        self.base_dir = base_dir
        """The config file's folder: a module that is nowhere else is looked for there."""

    async def start(self) -> None:
        try:
            module = import_beside(self.config.python or "", self.base_dir)
            specs = tools_of(module)
            if not specs:
                raise LookupError(
                    f"module {self.config.python!r} has no functions marked with @toolweave.tool"
                )
            tools = [_definition(spec) for spec in specs]
        except Exception as error:  # noqa: BLE001 - a bad module is a backend status, not a crash
            self._set_status("failed", f"cannot load python module {self.config.python!r}: {error}")
            self._ready.set()
            return
        self._specs = {spec.name: spec for spec in specs}
        self.tools = tools
        self._set_status("connected")
        self._ready.set()

    async def stop(self) -> None:
        self._set_status("stopped")

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        progress: Any = None,
    ) -> types.CallToolResult:
        spec = self._specs.get(name)
        if spec is None:
            return error_result(f"backend {self.name!r} has no tool {name!r}")
        try:
            values = spec.model.model_validate(arguments)
        except ValidationError as error:
            return error_result(f"invalid arguments for {name!r}: {error.errors()[0]['msg']}")
        kwargs = {key: getattr(values, key) for key in type(values).model_fields}
        limit = timeout if timeout is not None else self.config.timeout
        try:
            async with asyncio.timeout(limit):
                if inspect.iscoroutinefunction(spec.function):
                    value = await spec.function(**kwargs)
                else:
                    value = await asyncio.to_thread(spec.function, **kwargs)
        except TimeoutError:
            return error_result(f"tool {name!r} on backend {self.name!r} timed out after {limit:g}s")
        except Exception as error:  # noqa: BLE001 - a tool's exception is the agent's error result
            return error_result(f"{name} failed: {error}")
        return to_result(value)


def _definition(spec: ToolSpec) -> types.Tool:
    try:
        return spec.definition()
    except Exception as error:
        raise TypeError(f"tool {spec.name!r}: cannot build its input schema: {error}") from error


def to_result(value: Any) -> types.CallToolResult:
    """A function's return value as a result: text for str, structured + JSON text for dicts."""
    if isinstance(value, types.CallToolResult):
        return value
    if isinstance(value, str):
        return types.CallToolResult(content=[text(value)])
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, dict):
        return types.CallToolResult(content=[text(json_text(value))], structured_content=value)
    return types.CallToolResult(content=[text(json_text(value))])
