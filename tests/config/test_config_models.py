"""The config models on their own: durations, names, transports, patterns, tool references."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolweave.config import BackendConfig, ConfigError, GatewayConfig, parse_config
from toolweave.config.models import PolicyConfig
from toolweave.fields import parse_duration, split_tool_ref


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("30s", 30.0),
        ("500ms", 0.5),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        ("2d", 172800.0),
        (" 1m 30s ", 90.0),
        ("0", 0.0),
        ("12", 12.0),
        (7, 7.0),
        (0.25, 0.25),
    ],
)
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("soon", "invalid duration 'soon'"),
        ("30 sec", "invalid duration"),
        ("s", "invalid duration"),
        ("", "empty duration"),
        ("-1", "cannot be negative"),
        (-5, "cannot be negative"),
        (True, "a duration is"),
        ([1], "a duration is"),
        ("10s5", "invalid duration"),
    ],
)
def test_bad_durations_say_what_is_accepted(value: object, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_duration(value)


def test_durations_dump_back_as_text() -> None:
    backend = BackendConfig(name="a", command="x", timeout="500ms", connect_timeout="2m")
    dumped = backend.model_dump()
    assert dumped["timeout"] == "500ms" and dumped["connect_timeout"] == "120s"


@pytest.mark.parametrize(
    ("reference", "parts"),
    [
        ("github/search", ("github", "search")),
        ("github.search", ("github", "search")),
        ("docs/search.v2", ("docs", "search.v2")),
        ("a/b/c", ("a", "b/c")),
        ("plain_name", None),
        ("/search", None),
        ("docs/", None),
        (".x", None),
    ],
)
def test_split_tool_ref(reference: str, parts: tuple[str, str] | None) -> None:
    assert split_tool_ref(reference) == parts


@pytest.mark.parametrize("name", ["a", "github", "my-backend_2", "0x", "a" * 32])
def test_valid_backend_names(name: str) -> None:
    assert BackendConfig(name=name, command="x").name == name


@pytest.mark.parametrize("name", ["", "GitHub", "-x", "_x", "a b", "a/b", "a.b", "a" * 33, "é"])
def test_invalid_backend_names(name: str) -> None:
    with pytest.raises(ValidationError, match="must match"):
        BackendConfig(name=name, command="x")


def test_transport_is_exactly_one_of_command_url_python() -> None:
    assert BackendConfig(name="a", command="x").transport == "stdio"
    assert BackendConfig(name="a", url="https://h/mcp").transport == "http"
    assert BackendConfig(name="a", python="pkg.mod").transport == "python"
    with pytest.raises(ValidationError, match="found command, python"):
        BackendConfig(name="a", command="x", python="m")
    with pytest.raises(ValidationError, match="found none"):
        BackendConfig(name="a", args=["x"])


@pytest.mark.parametrize("separator", ["__", "-", "_", "--", "x"])
def test_separators(separator: str) -> None:
    assert GatewayConfig(separator=separator).separator == separator


@pytest.mark.parametrize("separator", ["", ".", "/", "::", "_____", " "])
def test_bad_separators(separator: str) -> None:
    with pytest.raises(ValidationError, match="separator"):
        GatewayConfig(separator=separator)


def test_models_are_frozen_and_strict() -> None:
    backend = BackendConfig(name="a", command="x")
    with pytest.raises(ValidationError):
        backend.name = "b"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="Extra inputs"):
        BackendConfig(name="a", command="x", timout="1s")  # type: ignore[call-arg]


@pytest.mark.parametrize("pattern", ["delete_*", "re:get_.*", "re:(a|b)", "x?y", "[ab]*"])
def test_valid_patterns(pattern: str) -> None:
    assert PolicyConfig(deny=[pattern]).deny == [pattern]
    assert BackendConfig(name="a", command="x", expose=[pattern]).expose == [pattern]


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("re:(x", "missing )"),
        ("re:a{2,1}", "invalid repetition size"),
        ("re:(?<=a)b", "invalid"),
        ("", "non-empty"),
    ],
)
def test_invalid_patterns_are_config_errors(pattern: str, fragment: str) -> None:
    raw = {
        "backends": [{"name": "a", "command": "x", "hide": ["ok_*", pattern]}],
        "policy": {"approval": [pattern], "rules": [{"tenant": "t", "deny": [pattern]}]},
    }
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    found = {issue.path: issue.message for issue in caught.value.issues}
    assert set(found) == {"backends[0].hide[1]", "policy.approval[0]", "policy.rules[0].deny[0]"}
    assert all(fragment in message for message in found.values()), found


def test_tool_overrides() -> None:
    backend = BackendConfig(
        name="a",
        command="x",
        tools={"search": {"name": "find", "keep_original": True, "description": "d", "concurrent": True}},
    )
    override = backend.tools["search"]
    assert (override.name, override.keep_original, override.description, override.concurrent) == (
        "find",
        True,
        "d",
        True,
    )
    with pytest.raises(ValidationError, match="alias 'has space'"):
        BackendConfig(name="a", command="x", tools={"search": {"name": "has space"}})
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        BackendConfig(name="a", command="x", tools={"search": {"max_concurrency": 0}})
