"""A federated client's manifest: its namespace and its tools, checked on arrival.

The manifest is what the client says about itself: the namespace it asked
for when it connected, and its answer to `tools/list` — standard MCP tools,
each with optional tracing metadata under `_meta["toolweave/federation"]`
(`handler`, `source`, `toolkit`). `read_manifest` checks everything that
depends only on the manifest and reports EVERY problem with a path; what
depends on the gateway (conflicts, ownership) is `federation.Federation`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from toolweave.backends.federated.protocol import META_KEY
from toolweave.fields import BACKEND_NAME_RE, EXPOSED_NAME_RE
from toolweave.problems import Problem, join_path, problems_from_validation
from toolweave.schemas.check import schema_error

MAX_META_CHARS = 200
MAX_DESCRIPTION_CHARS = 8192


@dataclass(frozen=True, slots=True)
class ToolMeta:
    """Where a federated tool runs inside its client, for traces: the function, its origin, its group."""

    handler: str | None = None
    source: str | None = None
    toolkit: str | None = None


@dataclass(frozen=True, slots=True)
class Manifest:
    namespace: str
    tools: list[types.Tool]
    meta: dict[str, ToolMeta] = field(default_factory=dict)

    def fingerprint(self) -> list[tuple[str, str]]:
        """What every client of one namespace must serve alike: the tools' names and input schemas."""
        return sorted((t.name, repr(sorted(t.input_schema.items()))) for t in self.tools)


def namespace_problem(namespace: str | None) -> Problem | None:
    if not namespace:
        return Problem("namespace", "a namespace is required (connect with ?namespace=NAME)")
    if not BACKEND_NAME_RE.match(namespace):
        return Problem("namespace", f"namespace {namespace!r} must match ^[a-z0-9][a-z0-9_-]{{0,31}}$")
    return None


def read_manifest(
    namespace: str | None, raw_tools: Any, max_tools: int
) -> tuple[Manifest | None, list[Problem]]:
    """The manifest, or None with every problem found (paths like `tools[2].inputSchema`)."""
    problems: list[Problem] = []
    found = namespace_problem(namespace)
    if found is not None:
        problems.append(found)
    if not isinstance(raw_tools, list):
        return None, [*problems, Problem("tools", "tools/list must answer a list of tools")]
    if not raw_tools:
        problems.append(Problem("tools", "the client serves no tools; register at least one"))
    if len(raw_tools) > max_tools:
        problems.append(Problem("tools", f"{len(raw_tools)} tools is more than the limit of {max_tools}"))
        raw_tools = raw_tools[:max_tools]
    tools: list[types.Tool] = []
    meta: dict[str, ToolMeta] = {}
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_tools):
        path = join_path("tools", index)
        tool, tool_meta, tool_problems = _read_tool(raw, path)
        problems.extend(tool_problems)
        if tool is None:
            continue
        if tool.name in seen:
            problems.append(
                Problem(
                    join_path(path, "name"), f"duplicate tool {tool.name!r} (also tools[{seen[tool.name]}])"
                )
            )
            continue
        seen[tool.name] = index
        tools.append(tool)
        meta[tool.name] = tool_meta
    if problems or namespace is None:
        return None, problems
    return Manifest(namespace, tools, meta), []


def _read_tool(raw: Any, path: str) -> tuple[types.Tool | None, ToolMeta, list[Problem]]:
    if not isinstance(raw, dict):
        return None, ToolMeta(), [Problem(path, "a tool must be an object")]
    problems: list[Problem] = []
    name = raw.get("name")
    if isinstance(name, str) and not EXPOSED_NAME_RE.match(name):
        problems.append(
            Problem(join_path(path, "name"), f"tool name {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
        )
    schema = raw.get("inputSchema")
    if isinstance(schema, dict):
        problems.extend(_schema_problems(schema, join_path(path, "inputSchema")))
    description = raw.get("description")
    if isinstance(description, str) and len(description) > MAX_DESCRIPTION_CHARS:
        problems.append(
            Problem(join_path(path, "description"), f"longer than {MAX_DESCRIPTION_CHARS} characters")
        )
    tool_meta, meta_problems = _read_meta(raw.get("_meta"), join_path(path, "_meta", META_KEY))
    problems.extend(meta_problems)
    try:
        tool = types.Tool.model_validate(raw, by_name=False)
    except ValidationError as error:
        problems.extend(p for p in problems_from_validation(error, path) if p not in problems)
        return None, tool_meta, problems
    return (None if problems else tool), tool_meta, problems


def _schema_problems(schema: dict[str, Any], path: str) -> list[Problem]:
    problems = []
    if schema.get("type") != "object":
        problems.append(Problem(join_path(path, "type"), 'an input schema must have "type": "object"'))
    error = schema_error(schema)
    if error is not None:
        where = join_path(path, *(str(part) for part in error.absolute_path))
        problems.append(Problem(where, f"not a valid JSON Schema: {error.message}"))
    return problems


def _read_meta(raw: Any, path: str) -> tuple[ToolMeta, list[Problem]]:
    if not isinstance(raw, dict) or META_KEY not in raw:
        return ToolMeta(), []
    found = raw[META_KEY]
    if not isinstance(found, dict):
        return ToolMeta(), [Problem(path, "must be an object with handler, source and toolkit")]
    problems = [
        Problem(join_path(path, key), "unknown key")
        for key in found
        if key not in ("handler", "source", "toolkit")
    ]
    values: dict[str, str | None] = {}
    for key in ("handler", "source", "toolkit"):
        value = found.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_META_CHARS):
            problems.append(
                Problem(join_path(path, key), f"must be a string of at most {MAX_META_CHARS} characters")
            )
            value = None
        values[key] = value
    return ToolMeta(**values), problems
