"""Loading ToolHive `VirtualMCPCompositeToolDefinition` documents as native workflow definitions.

The spec's fields already match toolweave's native keys (camelCase,
`dependsOn`, `onError`, `defaultResults`, forEach's `step`...), so the import
is mostly a copy; what changes is the template language. Every string that
ToolHive expands (step arguments, at any depth, `condition`, `message`,
`collection`, the inner step of a forEach, output `value`s) is translated
from Go-template syntax to Jinja by `gotemplate.translate`. Anything that
cannot be translated faithfully is an error naming it and where it is, never
a silent change of meaning.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolweave.composite.errors import GoTemplateError
from toolweave.composite.workflow.gotemplate import translate

TOOLHIVE_KIND = "VirtualMCPCompositeToolDefinition"
API_GROUP = "toolhive.stacklok.dev/"
_STEP_TEMPLATE_FIELDS = ("arguments", "condition", "message", "collection")


def translate_toolhive(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A ToolHive document → the native workflow definition; ValueError lists every untranslatable construct."""
    api = doc.get("apiVersion")
    if not isinstance(api, str) or not api.startswith(API_GROUP):
        raise ValueError(f"apiVersion must be {API_GROUP}<version> for a {TOOLHIVE_KIND} (got {api!r})")
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        raise ValueError(f"a {TOOLHIVE_KIND} needs a 'spec' mapping with the workflow")
    errors: list[str] = []
    native: dict[str, Any] = {"kind": "workflow"}
    for key, value in spec.items():
        native[key] = _field(key, value, f"spec.{key}", errors)
    if errors:
        raise ValueError("cannot import this ToolHive definition: " + "; ".join(errors))
    return native


def _field(key: str, value: Any, path: str, errors: list[str]) -> Any:
    if key == "steps" and isinstance(value, list):
        return [_step(step, f"{path}[{position}]", errors) for position, step in enumerate(value)]
    if key == "output" and isinstance(value, Mapping):
        return _output(value, path, errors)
    return _plain(value)


def _step(step: Any, path: str, errors: list[str]) -> Any:
    if not isinstance(step, Mapping):
        return _plain(step)
    out: dict[str, Any] = {}
    for key, value in step.items():
        where = f"{path}.{key}"
        if key in _STEP_TEMPLATE_FIELDS:
            out[key] = _templates(value, where, errors)
        elif key == "step":
            out[key] = _step(value, where, errors)
        else:
            out[key] = _plain(value)
    return out


def _output(output: Mapping[str, Any], path: str, errors: list[str]) -> dict[str, Any]:
    out = {key: _plain(value) for key, value in output.items()}
    properties = output.get("properties")
    if isinstance(properties, Mapping):
        out["properties"] = _output_properties(properties, f"{path}.properties", errors)
    return out


def _output_properties(properties: Mapping[str, Any], path: str, errors: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, prop in properties.items():
        if not isinstance(prop, Mapping):
            out[name] = _plain(prop)
            continue
        converted = {key: _plain(value) for key, value in prop.items()}
        if "value" in prop:
            converted["value"] = _templates(prop["value"], f"{path}.{name}.value", errors)
        if isinstance(prop.get("properties"), Mapping):
            converted["properties"] = _output_properties(
                prop["properties"], f"{path}.{name}.properties", errors
            )
        out[name] = converted
    return out


def _templates(value: Any, path: str, errors: list[str]) -> Any:
    """Translate every string in a value (ToolHive expands nested maps and lists too)."""
    if isinstance(value, str):
        if "{" not in value:
            return value
        try:
            return translate(value)
        except GoTemplateError as error:
            errors.append(f"{path}: {error}")
            return value
    if isinstance(value, Mapping):
        return {key: _templates(item, f"{path}.{key}", errors) for key, item in value.items()}
    if isinstance(value, list):
        return [_templates(item, f"{path}[{position}]", errors) for position, item in enumerate(value)]
    return value


def _plain(value: Any) -> Any:
    """A detached copy, so the translated definition never shares mutable parts with the document."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value
