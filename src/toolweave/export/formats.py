"""Tool definitions in the formats agents and LLM APIs load (docs/export.md).

`export_tools(tools, format)` turns the catalog's `mcp_types.Tool`s into plain
JSON-ready dicts, one per tool, in input order:

* `mcp` — the MCP tool JSON (camelCase): name, title, description,
  inputSchema, outputSchema, annotations. Names are kept verbatim.
* `openai` — Chat Completions:
  `{"type": "function", "function": {"name", "description", "parameters", "strict"?}}`;
  `strict: true` only when the schema qualifies (see `strict.py`), otherwise
  the key is left out (Chat Completions then treats the function as
  non-strict).
* `openai-responses` — Responses API:
  `{"type": "function", "name", "description", "parameters", "strict"}`;
  `strict` is always present, `false` when the schema does not qualify,
  because the Responses API treats a missing `strict` as `true`.
* `anthropic` — Messages API: `{"name", "description", "input_schema"}`.
* `langchain` — `{"name", "description", "args_schema"}`: exactly the
  fields of a LangChain `StructuredTool`, with the JSON Schema as
  `args_schema` (which langchain-core accepts as a dict), so
  `StructuredTool(**entry, coroutine=...)` loads it. For a ready-made,
  callable tool use `toolweave.integrations.langchain.as_langchain_tools`.
* `universal` — a provider-neutral tool: `{"name", "description", "parameters"}`.

Every format but `mcp` carries names an LLM provider accepts (`names.py`).
Descriptions are the tools' own — a composite's is already its mini-prompt
(docs/export.md); a tool without one gets its title, else "".

An export contains only names, descriptions, schemas and (for `mcp`) titles
and annotations: never `_meta`, icons or anything a backend attached; secret
values are stripped from schemas (`schema.py`). The same tools always give
the same JSON, key for key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from toolweave.export.names import safe_names, unique_names
from toolweave.export.schema import export_schema, parameters_schema
from toolweave.export.strict import is_strict_compatible

if TYPE_CHECKING:  # annotations only: the CLI reads FORMATS without loading the MCP types
    import mcp_types as types

ExportedTool = dict[str, Any]
Exporter = Callable[["types.Tool", str], ExportedTool]
"""`(tool, exported name) -> one tool in the format`."""


def _mcp(tool: types.Tool, name: str) -> ExportedTool:
    entry: ExportedTool = {"name": name}
    if tool.title is not None:
        entry["title"] = tool.title
    if tool.description is not None:
        entry["description"] = tool.description
    entry["inputSchema"] = export_schema(tool.input_schema) or {"type": "object"}
    output = export_schema(tool.output_schema)
    if output is not None:
        entry["outputSchema"] = output
    if tool.annotations is not None:
        entry["annotations"] = tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
    return entry


def _openai(tool: types.Tool, name: str) -> ExportedTool:
    parameters = parameters_schema(tool.input_schema)
    function: ExportedTool = {"name": name, "description": description_of(tool), "parameters": parameters}
    if is_strict_compatible(parameters):
        function["strict"] = True
    return {"type": "function", "function": function}


def _openai_responses(tool: types.Tool, name: str) -> ExportedTool:
    parameters = parameters_schema(tool.input_schema)
    return {
        "type": "function",
        "name": name,
        "description": description_of(tool),
        "parameters": parameters,
        "strict": is_strict_compatible(parameters),
    }


def _anthropic(tool: types.Tool, name: str) -> ExportedTool:
    return {
        "name": name,
        "description": description_of(tool),
        "input_schema": parameters_schema(tool.input_schema),
    }


def _langchain(tool: types.Tool, name: str) -> ExportedTool:
    return {
        "name": name,
        "description": description_of(tool),
        "args_schema": parameters_schema(tool.input_schema),
    }


def _universal(tool: types.Tool, name: str) -> ExportedTool:
    return {
        "name": name,
        "description": description_of(tool),
        "parameters": parameters_schema(tool.input_schema),
    }


_EXPORTERS: Final[Mapping[str, Exporter]] = {
    "mcp": _mcp,
    "openai": _openai,
    "openai-responses": _openai_responses,
    "anthropic": _anthropic,
    "langchain": _langchain,
    "universal": _universal,
}
FORMATS: Final = tuple(_EXPORTERS)
"""The export formats, in the order the docs list them."""
VERBATIM_NAME_FORMATS: Final = frozenset({"mcp"})
"""Formats that keep tool names as they are (MCP allows more than LLM APIs do)."""


def export_tools(tools: Sequence[types.Tool], format: str) -> list[ExportedTool]:
    """Every tool in `format`, in input order.

    Raises ValueError for an unknown format, a tool listed twice, or two tools
    whose provider-safe names would be the same.
    """
    exporter = _exporter(format)
    names = exported_names([tool.name for tool in tools], format)
    return [exporter(tool, names[tool.name]) for tool in tools]


def export_tool(tool: types.Tool, format: str) -> ExportedTool:
    """One tool in `format` (a single composite's export endpoint)."""
    return export_tools([tool], format)[0]


def exported_names(names: Sequence[str], format: str) -> dict[str, str]:
    """Original name → the name `format` exports it under (to map a model's tool call back)."""
    _exporter(format)
    return unique_names(names) if format in VERBATIM_NAME_FORMATS else safe_names(names)


def description_of(tool: types.Tool) -> str:
    """The text an LLM reads: the description, else the title, else nothing."""
    for text in (tool.description, tool.title):
        if text and text.strip():
            return text
    return ""


def _exporter(format: str) -> Exporter:
    exporter = _EXPORTERS.get(format)
    if exporter is None:
        raise ValueError(f"unknown export format {format!r}; valid formats: {', '.join(FORMATS)}")
    return exporter
