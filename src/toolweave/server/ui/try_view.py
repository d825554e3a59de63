"""Try it: a form generated from a tool's input schema, the form read back into arguments, and the
result explained (content, structured content as a tree, `isError`, what `_meta.toolweave` means).

The form covers what people type: strings, numbers, integers, booleans and enums as fields
(required marks, defaults, descriptions); nested objects and arrays as JSON boxes, checked
when sent. Every argument problem is reported at its field before anything is called.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import orjson

from toolweave.results import META_KEY
from toolweave.runs import StepRecord, is_step_status
from toolweave.schemas.read import properties_of, required_of
from toolweave.server.ui.run_view import Timeline, timeline

MAX_FIELDS = 100
"""A schema with more properties than this is tried through its JSON box only."""
MAX_SHOWN = 200_000
"""Characters of one text block (or of the structured content) put in the page; the rest is cut,
saying so: a huge result must not make a huge page."""


@dataclass(frozen=True, slots=True)
class FormField:
    name: str
    widget: str
    """text | number | integer | boolean | enum | json"""
    required: bool
    description: str = ""
    default: str = ""
    options: tuple[str, ...] = ()
    schema_type: str = ""


def _type_of(schema: dict[str, Any]) -> str:
    found = schema.get("type")
    if isinstance(found, list):
        found = next((t for t in found if t != "null"), "")
    return found if isinstance(found, str) else ""


def _default_text(schema: dict[str, Any], widget: str) -> str:
    if "default" not in schema:
        return ""
    value = schema["default"]
    if widget == "json":
        return orjson.dumps(value).decode()
    if widget == "boolean":
        return "true" if value else ""
    return "" if value is None else str(value)


def form_fields(schema: dict[str, Any] | None) -> list[FormField]:
    """One field per top-level property, in schema order."""
    properties = properties_of(schema)
    if len(properties) > MAX_FIELDS:
        return []
    required = set(required_of(schema))
    fields = []
    for name, prop in properties.items():
        kind = _type_of(prop)
        enum = prop.get("enum")
        options: tuple[str, ...] = ()
        if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
            widget = "enum"
            options = tuple(enum)
        elif kind in ("string", "number", "integer", "boolean"):
            widget = {"string": "text"}.get(kind, kind)
        else:
            widget = "json"
        fields.append(
            FormField(
                name=str(name),
                widget=widget,
                required=name in required,
                description=str(prop.get("description") or ""),
                default=_default_text(prop, widget),
                options=options,
                schema_type=kind,
            )
        )
    return fields


@dataclass(slots=True)
class ReadArguments:
    arguments: dict[str, Any] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)


def read_arguments(fields: list[FormField], form: Any) -> ReadArguments:
    """The form's values as the tool's arguments; an empty optional field is left out."""
    raw_json = str(form.get("__json__") or "").strip()
    if raw_json:
        try:
            parsed = orjson.loads(raw_json)
        except orjson.JSONDecodeError as error:
            return ReadArguments(problems={"__json__": f"not valid JSON: {error}"})
        if not isinstance(parsed, dict):
            return ReadArguments(problems={"__json__": "the arguments must be a JSON object"})
        return ReadArguments(arguments=parsed)
    read = ReadArguments()
    for item in fields:
        value = form.get(item.name)
        text = value.strip() if isinstance(value, str) else ""
        if item.widget == "boolean":
            if text or item.required:
                read.arguments[item.name] = text == "true"
            continue
        if not text:
            continue
        try:
            read.arguments[item.name] = _parse(item, text)
        except ValueError as error:
            read.problems[item.name] = str(error)
    return read


def _parse(item: FormField, text: str) -> Any:
    if item.widget == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number") from None
    if item.widget == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        return int(number) if number.is_integer() and "." not in text else number
    if item.widget == "json":
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError as error:
            raise ValueError(f"not valid JSON: {error}") from None
    return text


@dataclass(slots=True)
class ResultView:
    """A call's result, ready to show."""

    is_error: bool
    texts: list[str] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)
    """(mime type, base64 data) of image content."""
    other: list[str] = field(default_factory=list)
    structured: Any = None
    meta: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    timeline: Timeline | None = None
    """A workflow's steps on a timeline (from `_meta.toolweave.steps`)."""


def _clipped(text: str) -> str:
    if len(text) <= MAX_SHOWN:
        return text
    return f"{text[:MAX_SHOWN]}\n… ({len(text) - MAX_SHOWN:,} more characters not shown)"


def result_view(result: types.CallToolResult) -> ResultView:
    view = ResultView(is_error=bool(result.is_error))
    for block in result.content:
        if isinstance(block, types.TextContent):
            view.texts.append(_clipped(block.text))
        elif isinstance(block, types.ImageContent) and block.mime_type.startswith("image/"):
            view.images.append((block.mime_type, block.data))
        else:
            view.other.append(_clipped(orjson.dumps(block.model_dump(mode="json", by_alias=True)).decode()))
    structured = result.structured_content
    if structured is not None and len(orjson.dumps(structured)) > MAX_SHOWN:
        view.other.append(_clipped(orjson.dumps(structured).decode()))  # too big for a tree: as text, cut
    else:
        view.structured = structured
    meta = (result.meta or {}).get(META_KEY)
    if isinstance(meta, dict):
        view.meta = meta
        run_id = meta.get("run_id")
        view.run_id = run_id if isinstance(run_id, str) else None
        view.timeline = _steps_timeline(meta.get("steps"))
    return view


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _steps_timeline(steps: Any) -> Timeline | None:
    """The `_meta` steps as timeline bars; None when there are none (or they are not step objects)."""
    if not isinstance(steps, list):
        return None
    records = [
        StepRecord(
            id=str(step["id"]),
            status=status if is_step_status(status := step.get("status")) else "failed",
            attempts=int(_number(step.get("attempts")) or 0),
            latency_ms=_number(step.get("latency_ms")) or 0.0,
            start_ms=_number(step.get("start_ms")),
        )
        for step in steps
        if isinstance(step, dict) and "id" in step
    ]
    return timeline(records) if records else None
