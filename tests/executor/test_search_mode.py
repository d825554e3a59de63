"""Search mode through the gateway: what is listed, what `find_tools` searches beyond a tool's own
text (its backend's server info and config, per-tool keywords), and its compact answers."""

from __future__ import annotations

import pytest

from support.configs import python_backend, stdio_backend
from support.fixtures import OpenGateway
from support.results import text
from toolweave.config import ConfigError, parse_config

SEARCH = {"tool_exposure": "search"}
GREET_TWICE = {
    "name": "greet_twice",
    "description": "Greet two people, one after the other",
    "steps": [
        {"id": "a", "tool": "py/greet", "arguments": {"name": "a"}},
        {"id": "b", "tool": "py/greet", "arguments": {"name": "b"}, "dependsOn": ["a"]},
    ],
}


def found_names(answer: str) -> list[str]:
    return [line.split("(", 1)[0] for line in answer.splitlines() if "(" in line and " - " in line]


async def test_composites_are_listed_beside_the_search_tools_by_default(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway(
        {"backends": [python_backend()], "gateway": SEARCH, "composite_tools": [GREET_TWICE]}
    )
    assert [t.name for t in gateway.list_tools()] == ["find_tools", "call_tool", "greet_twice"]


async def test_listing_composites_can_be_turned_off(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway(
        {
            "backends": [python_backend()],
            "gateway": SEARCH,
            "search": {"list_composites": False},
            "composite_tools": [GREET_TWICE],
        }
    )
    assert [t.name for t in gateway.list_tools()] == ["find_tools", "call_tool"]
    found = await gateway.call("find_tools", {"query": "greet two people"})
    assert found_names(text(found))[0] == "greet_twice"


async def test_backend_description_and_keywords_from_config_are_searched(open_gateway: OpenGateway) -> None:
    backend = python_backend(
        "misc",
        description="Arithmetic helpers for invoices",
        keywords=["calculator"],
        tools={"greet": {"keywords": ["salutation", "welcome message"]}},
    )
    gateway = await open_gateway({"backends": [backend], "gateway": SEARCH})
    calculator = await gateway.call("find_tools", {"query": "calculator", "limit": 50})
    assert found_names(text(calculator)) and all(
        n.startswith("misc__") for n in found_names(text(calculator))
    )
    welcome = await gateway.call("find_tools", {"query": "write a welcome message"})
    assert found_names(text(welcome))[0] == "misc__greet"


async def test_a_servers_own_name_is_searched(open_gateway: OpenGateway) -> None:
    """A backend named `ado` is found by "Azure": its server calls itself "Azure DevOps" in `initialize`."""
    backend = stdio_backend("ado", env={"TESTSERVER_NAME": "Azure DevOps"})
    gateway = await open_gateway({"backends": [backend], "gateway": SEARCH})
    answer = text(await gateway.call("find_tools", {"query": "azure", "limit": 3}))
    assert len(found_names(answer)) == 3 and all(name.startswith("ado__") for name in found_names(answer))


async def test_a_find_tools_answer_is_one_line_a_tool(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway({"backends": [python_backend()], "gateway": SEARCH})
    result = await gateway.call("find_tools", {"query": "greet someone", "limit": 1})
    assert result.structured_content is None
    assert text(result).splitlines() == [
        "py__greet(name: string, excited?: boolean) - Greet someone by name.",
        "Call with call_tool {name, arguments}; find_tools detail=true gives full schemas.",
    ]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"keywords": [""]}, "String should have at least 1 character"),
        ({"keywords": "azure"}, "Input should be a valid list"),
        ({"description": "x" * 2001}, "String should have at most 2000 characters"),
        ({"tools": {"greet": {"keywords": ["x" * 101]}}}, "String should have at most 100 characters"),
    ],
)
def test_bad_search_settings_are_config_errors(entry: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"backends": [python_backend(**entry)]})


def test_an_unknown_search_setting_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="list_composite"):
        parse_config({"search": {"list_composite": False}})
