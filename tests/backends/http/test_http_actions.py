"""Declared HTTP actions (`http = BASE_URL` + `[[backends.actions]]`) against the real test API."""

from __future__ import annotations

from typing import Any

import pytest

from support.configs import config
from support.fixtures import OpenGateway
from support.results import text
from toolweave.config import ConfigError, parse_config


def actions_backend(api_url: str, actions: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"name": "act", "http": api_url, "actions": actions, **extra}


async def test_a_get_action_with_a_path_template_and_query_arguments(
    open_gateway: OpenGateway, api_url: str
) -> None:
    action = {
        "name": "lookup",
        "description": "Look an item up",
        "url": "/echo/item/{name}?units=metric&lang={lang}",
        "input_schema": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "lang": {"type": "string"},
                "limit": {"type": "integer"},
            },
            "required": ["name"],
        },
    }
    gw = await open_gateway(config(actions_backend(api_url, [action])))
    tool = gw.catalog.get("act__lookup").tool
    assert tool.description == "Look an item up" and tool.annotations.read_only_hint is True  # type: ignore[union-attr]
    result = await gw.call("act__lookup", {"name": "a/b c", "lang": "fr", "limit": 3})
    assert not result.is_error, text(result)
    got = result.structured_content
    assert got["path"] == "/echo/item/a%2Fb%20c"
    assert got["query"] == "units=metric&lang=fr&limit=3"


async def test_a_post_action_sends_a_json_body_and_templated_headers(
    open_gateway: OpenGateway, api_url: str
) -> None:
    action = {
        "name": "create",
        "method": "post",
        "url": f"{api_url}/echo/things",
        "headers": {"X-Request-Id": "req-{rid}"},
        "input_schema": {
            "type": "object",
            "properties": {"rid": {"type": "string"}, "title": {"type": "string"}, "tags": {"type": "array"}},
            "required": ["rid", "title"],
        },
    }
    gw = await open_gateway(
        config(actions_backend(api_url, [action], auth={"type": "bearer", "token": "tok-1234"}))
    )
    result = await gw.call("act__create", {"rid": "7", "title": "T", "tags": ["x"]})
    got = result.structured_content
    assert got["method"] == "POST" and got["headers"]["x-request-id"] == "req-7"
    assert got["body"] == '{"title":"T","tags":["x"]}'
    assert got["headers"]["authorization"] == "Bearer tok-1234"
    tool = gw.catalog.get("act__create").tool
    assert tool.annotations.read_only_hint is None  # type: ignore[union-attr]


async def test_default_schema_form_body_and_annotation_overrides(
    open_gateway: OpenGateway, api_url: str
) -> None:
    actions = [
        {"name": "one", "url": "/echo/one/{id}"},
        {
            "name": "form",
            "method": "POST",
            "url": "/echo/form",
            "body": "form",
            "read_only": True,
            "input_schema": {"type": "object", "properties": {"a": {"type": "string"}}},
        },
    ]
    gw = await open_gateway(config(actions_backend(api_url, actions)))
    one = gw.catalog.get("act__one").tool
    assert one.input_schema == {
        "type": "object",
        "properties": {"id": {"type": "string"}},
        "required": ["id"],
        "additionalProperties": False,
    }
    assert (await gw.call("act__one", {"id": "x"})).structured_content["path"] == "/echo/one/x"
    form = await gw.call("act__form", {"a": "b c"})
    assert form.structured_content["body"] == "a=b%20c"
    assert gw.catalog.get("act__form").tool_class == "read"


def test_action_config_problems_are_reported_with_their_paths() -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(
            {
                "backends": [
                    {
                        "name": "a",
                        "http": "https://api.example.com",
                        "actions": [
                            {"name": "bad name!", "url": "/x"},
                            {"name": "m", "method": "FETCH", "url": "/x"},
                            {"name": "t", "url": "/x/{id"},
                            {
                                "name": "s",
                                "url": "/x/{id}",
                                "input_schema": {"type": "object", "properties": {}},
                            },
                        ],
                    },
                    {"name": "b", "http": "https://api.example.com"},
                    {"name": "c", "openapi": "x.json", "actions": [{"name": "x", "url": "/x"}]},
                ]
            }
        )
    message = str(error.value)
    assert "backends[0].actions[0].name" in message
    assert "backends[0].actions[1].method" in message
    assert "backends[0].actions[2].url" in message and "unbalanced" in message
    assert "placeholder(s) id are not properties of input_schema" in message
    assert "needs at least one [[backends.actions]]" in message
    assert "'actions' needs 'http'" in message


async def test_an_action_url_outside_the_base_fails_the_backend(
    open_gateway: OpenGateway, api_url: str
) -> None:
    gw = await open_gateway(
        config(actions_backend(api_url, [{"name": "x", "url": "https://elsewhere.example/x"}]))
    )
    assert gw.backends["act"].status == "failed"
    assert "must lie under the backend's base URL" in (gw.backends["act"].last_error or "")
