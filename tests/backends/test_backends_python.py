"""In-process Python backends: `python = "module"` with functions marked `@toolweave.tool`."""

from __future__ import annotations

from typing import Any

import pytest
import tw_pytools

import toolweave
from support.configs import python_backend
from support.fixtures import OpenGateway
from support.paths import PYTOOLS
from support.results import text
from toolweave.backends.python import PythonBackend, _parse_docstring, tools_of
from toolweave.config import BackendConfig


async def started(module: str = PYTOOLS, **extra: Any) -> PythonBackend:
    backend = PythonBackend(BackendConfig.model_validate(python_backend(module=module, **extra)))
    await backend.start()
    return backend


def definition(backend: PythonBackend, name: str) -> Any:
    return next(t for t in backend.tools if t.name == name)


async def test_tools_come_from_decorated_functions_only() -> None:
    backend = await started()
    assert backend.status == "connected" and backend.describe()["transport"] == "python"
    assert [t.name for t in backend.tools] == [
        "greet",
        "multiply",
        "squared_distance",
        "drop_table",
        "explode",
        "nap",
        "where_am_i",
        "numbers",
    ]
    assert await backend.wait_ready(0.1)


async def test_schema_description_and_annotations() -> None:
    greet = definition(await started(), "greet")
    assert greet.description == "Greet someone by name."
    assert greet.input_schema == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Name", "description": "Who to greet."},
            "excited": {
                "type": "boolean",
                "title": "Excited",
                "default": False,
                "description": "End with an exclamation mark instead of a full stop.",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    assert greet.annotations.read_only_hint is True and greet.annotations.destructive_hint is None


async def test_decorator_options() -> None:
    backend = await started()
    multiply = definition(backend, "multiply")  # renamed from `mul`
    assert multiply.annotations.title == "Multiply" and multiply.annotations.idempotent_hint is True
    assert definition(backend, "drop_table").annotations.destructive_hint is True
    assert definition(backend, "explode").annotations is None  # bare @toolweave.tool
    point = definition(backend, "squared_distance").input_schema
    assert point["properties"]["point"]["$ref"].endswith("Point") and "$defs" in point


async def test_results() -> None:
    backend = await started()
    greeting = await backend.call_tool("greet", {"name": "Ada", "excited": True})
    assert text(greeting) == "Hello, Ada!" and greeting.structured_content is None
    product = await backend.call_tool("multiply", {"a": 2, "b": 3.5})
    assert product.structured_content == {"product": 7.0} and text(product) == '{"product":7.0}'
    distance = await backend.call_tool("squared_distance", {"point": {"x": 3, "y": 4}})
    assert distance.structured_content == {"squared": 25}
    listed = await backend.call_tool("numbers", {"count": 3})
    assert text(listed) == "[0,1,2]" and listed.structured_content is None


async def test_sync_tools_run_off_the_event_loop_thread() -> None:
    result = await (await started()).call_tool("where_am_i", {})
    assert result.structured_content == {"main_thread": False}


async def test_failures_are_error_results() -> None:
    backend = await started(timeout="200ms")
    exploded = await backend.call_tool("explode", {"message": "out of coffee"})
    assert exploded.is_error and text(exploded) == "explode failed: out of coffee"
    slow = await backend.call_tool("nap", {"seconds": 5})
    assert slow.is_error and text(slow) == "tool 'nap' on backend 'py' timed out after 0.2s"
    invalid = await backend.call_tool("greet", {"name": 42})
    assert invalid.is_error and text(invalid).startswith("invalid arguments for 'greet':")
    unexpected = await backend.call_tool("greet", {"name": "x", "shout": True})
    assert unexpected.is_error
    unknown = await backend.call_tool("nope", {})
    assert unknown.is_error and text(unknown) == "backend 'py' has no tool 'nope'"
    assert not (await backend.call_tool("nap", {"seconds": 0.01}, timeout=2)).is_error


@pytest.mark.parametrize(
    ("module", "message"),
    [
        (
            "tw_no_such_module",
            "cannot load python module 'tw_no_such_module': No module named 'tw_no_such_module'",
        ),
        (
            "tw_pytools_broken",
            "cannot load python module 'tw_pytools_broken': this module is broken on purpose",
        ),
        ("json", "module 'json' has no functions marked with @toolweave.tool"),
        ("tw_pytools_undefined", "tool 'broken': cannot build its input schema"),
    ],
)
async def test_modules_that_cannot_serve(module: str, message: str) -> None:
    backend = await started(module)
    assert backend.status == "failed" and backend.tools == []
    assert message in (backend.last_error or "")
    assert not await backend.wait_ready(0.1)
    await backend.stop()
    assert backend.status == "stopped"


async def test_postponed_annotations_and_types_defined_after_the_tool() -> None:
    backend = await started("tw_pytools_late")
    assert backend.status == "connected", backend.last_error
    assert "Rect" in str(definition(backend, "area").input_schema)
    result = await backend.call_tool("area", {"shape": {"w": 3, "h": 4}})
    assert text(result) == "12"


async def test_python_backend_behind_the_gateway(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway({"backends": [python_backend()]})
    listed = {t.name: t for t in gateway.list_tools()}
    assert "py__greet" in listed and listed["py__greet"].annotations.read_only_hint is True
    before = tw_pytools.CALLS["greet"]
    rejected = await gateway.call("py__greet", {"name": ["not", "a", "string"]})
    assert (
        rejected.is_error and "argument 'name'" in text(rejected) and "Nothing was called" in text(rejected)
    )
    assert tw_pytools.CALLS["greet"] == before  # validation happened before the function
    assert text(await gateway.call("py__greet", {"name": "Bo"})) == "Hello, Bo."
    assert tw_pytools.CALLS["greet"] == before + 1


def test_docstring_parsing() -> None:
    summary, params = _parse_docstring(
        "Do a thing.\n\nMore detail.\n\nArgs:\n    a (int): first\n        continued\n    b: second\n\n"
        "Returns:\n    nothing\n"
    )
    assert summary == "Do a thing.\n\nMore detail."
    assert params == {"a": "first continued", "b": "second"}
    assert _parse_docstring("") == ("", {})


def test_decorator_keeps_the_function_callable() -> None:
    @toolweave.tool(read_only=True)
    def double(x: int) -> int:
        """Double it."""
        return 2 * x

    assert double(4) == 8

    class Module:
        pass

    Module.double = double  # type: ignore[attr-defined]
    (spec,) = tools_of(Module)
    assert spec.name == "double" and spec.definition().description == "Double it."


async def test_a_module_next_to_the_config_is_found_without_pythonpath(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.path", list(__import__("sys").path))  # whatever is added is undone
    (tmp_path / "tw_beside_config.py").write_text(
        "import toolweave\n\n\n@toolweave.tool\ndef shout(text: str) -> str:\n    return text.upper()\n"
    )
    (tmp_path / "toolweave.toml").write_text('[[backends]]\nname = "mine"\npython = "tw_beside_config"\n')
    async with toolweave.Gateway.from_config(tmp_path / "toolweave.toml") as gw:
        assert gw.backends["mine"].status == "connected", gw.backends["mine"].last_error
        assert text(await gw.call("mine__shout", {"text": "found"})) == "FOUND"


async def test_a_module_found_nowhere_says_where_it_was_looked_for(tmp_path: Any) -> None:
    (tmp_path / "toolweave.toml").write_text('[[backends]]\nname = "mine"\npython = "tw_nowhere_at_all"\n')
    async with toolweave.Gateway.from_config(tmp_path / "toolweave.toml") as gw:
        error = gw.backends["mine"].last_error or ""
    assert "cannot load python module 'tw_nowhere_at_all'" in error
    assert f"nor in the config's folder {tmp_path.resolve()}" in error and "PYTHONPATH" in error, error
