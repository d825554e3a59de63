"""The builder's text editor: one definition as YAML or as TOML, both ways.

YAML is the body of `POST /api/v1/composite-tools` (and a `composite_tools` entry of a YAML config);
TOML is a `[[composite_tools]]` entry of a TOML config file. TOML has no writer in the standard
library, so `to_toml` writes the small subset a definition needs: top-level keys, and nested values as
inline tables and arrays (one step or target a line). Reading uses `tomllib`.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from typing import Any

import yaml

from toolweave.server.ui.builder_forms import MAX_DEPTH, nesting_depth

MAX_TEXT = 200_000
FORMATS = ("yaml", "toml")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
TOML_HEADER = "[[composite_tools]]"


def to_yaml(definition: Mapping[str, Any] | list[Any]) -> str:
    """A definition (or a list in one, such as a schema's) as block YAML, keys in their order."""
    document = dict(definition) if isinstance(definition, Mapping) else definition
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _value(value: Any) -> str:
    """One TOML value on one line (None has no TOML form: such keys are left out by the caller)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return (
            repr(value)
            if math.isfinite(value)
            else ("nan" if math.isnan(value) else f"{'-' if value < 0 else ''}inf")
        )
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(value, Mapping):
        items = [f"{_key(str(k))} = {_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value if item is not None) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def to_toml(definition: Mapping[str, Any]) -> str:
    lines = [TOML_HEADER]
    for key, value in definition.items():
        if value is None:
            continue
        if isinstance(value, list) and value and all(isinstance(item, Mapping) for item in value):
            lines.append(f"{_key(str(key))} = [")
            lines += [f"  {_value(item)}," for item in value]
            lines.append("]")
        else:
            lines.append(f"{_key(str(key))} = {_value(value)}")
    return "\n".join(lines) + "\n"


def write(definition: Mapping[str, Any], fmt: str) -> str:
    return to_toml(definition) if fmt == "toml" else to_yaml(definition)


def read(text: str, fmt: str) -> tuple[dict[str, Any] | None, str]:
    """(definition, "") or (None, why the text is not one)."""
    if len(text) > MAX_TEXT:
        return None, f"the text is longer than {MAX_TEXT} characters"
    if fmt == "toml":
        try:
            loaded: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            return None, f"not valid TOML: {error}"
        entries = loaded.get("composite_tools")
        if set(loaded) == {"composite_tools"} and isinstance(entries, list):
            if len(entries) != 1:
                return None, "give exactly one [[composite_tools]] entry"
            loaded = entries[0]
    else:
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as error:
            return None, f"not valid YAML: {error}"
    if not isinstance(loaded, dict):
        return None, "the text must be a mapping (one tool definition)"
    if nesting_depth(loaded) > MAX_DEPTH:
        return None, f"the definition is nested deeper than {MAX_DEPTH} levels"
    return loaded, ""
