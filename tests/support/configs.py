"""Configs for tests, in one dialect: entries are dicts, parsed with the real loader (`config`) or
written to a file by one writer (`toml_document`, or YAML by the `write_config` fixture)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from support.paths import PYTHON, PYTOOLS, TESTSERVER, TIME_SERVER
from toolweave.config import Config, ConfigError, parse_config


def stdio_backend(name: str = "ts", **extra: Any) -> dict[str, Any]:
    """A `[[backends]]` entry running tests/servers/testserver.py over stdio."""
    return {"name": name, "command": PYTHON, "args": [str(TESTSERVER)], **extra}


def named_stdio_backend(name: str, **extra: Any) -> dict[str, Any]:
    """`stdio_backend` whose server calls itself `name` (TESTSERVER_NAME), so results say which one ran."""
    return stdio_backend(name, env={"TESTSERVER_NAME": name}, **extra)


def time_backend(name: str = "time", **extra: Any) -> dict[str, Any]:
    """The third-party `mcp-server-time` over stdio."""
    return {"name": name, "command": str(TIME_SERVER), **extra}


def python_backend(name: str = "py", module: str = PYTOOLS, **extra: Any) -> dict[str, Any]:
    return {"name": name, "python": module, **extra}


def http_backend(name: str, url: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "url": url, **extra}


def openapi_backend(name: str, base: str, **extra: Any) -> dict[str, Any]:
    """A `[[backends]]` entry for the test API's OpenAPI document (served by `api_testserver`)."""
    return {"name": name, "openapi": f"{base}/openapi.json", **extra}


def config(*backends: dict[str, Any], **sections: Any) -> Config:
    """A validated config from backend entries and other top-level sections."""
    raw: dict[str, Any] = {"backends": list(backends), **sections}
    parsed = parse_config(raw)
    assert parsed is not None
    return parsed


# -- TOML, for tests that need a config file ----------------------------------------------


def toml_value(value: Any) -> str:
    """A TOML literal for a JSON-like value (strings via JSON escapes, which TOML accepts)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Path):
        return json.dumps(str(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return (
            "{ " + ", ".join(f"{json.dumps(key)} = {toml_value(item)}" for key, item in value.items()) + " }"
        )
    raise TypeError(f"no TOML form for {value!r}")


def toml_table(name: str, entry: Mapping[str, Any], *, array: bool = True) -> str:
    """One `[[name]]` (or `[name]`) table whose values are written inline."""
    header = f"[[{name}]]" if array else f"[{name}]"
    return "\n".join([header, *(f"{key} = {toml_value(value)}" for key, value in entry.items())]) + "\n"


def toml_document(sections: Mapping[str, Mapping[str, Any] | Sequence[Mapping[str, Any]]]) -> str:
    """A config file: a list of entries becomes an array of tables, a mapping one table."""
    parts = []
    for name, section in sections.items():
        if isinstance(section, Mapping):
            parts.append(toml_table(name, section, array=False))
        else:
            parts.extend(toml_table(name, entry) for entry in section)
    return "\n".join(parts)


def write_toml(directory: Path, text: str, name: str = "toolweave.toml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def stdio_testserver(name: str, **extra: Any) -> str:
    """A `[[backends]]` table running tests/servers/testserver.py over stdio as `name`."""
    return toml_table("backends", named_stdio_backend(name, **extra))


def write_ts_config(directory: Path) -> Path:
    """A TOML config with one stdio backend, `ts`, running the test server."""
    return write_toml(directory, toml_document({"backends": [stdio_backend("ts")]}))


# -- one composite definition, through the real loader ------------------------------------


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
