"""Document → tool specs, without any network: Swagger 2.0, OpenAPI 3.0 and 3.1, references, filters, names."""

from __future__ import annotations

import time
from typing import Any

import jsonschema
import orjson
import yaml

from toolweave.backends.openapi import ConvertOptions, convert, parse_document
from toolweave.backends.openapi.spec import Conversion, OperationSpec


def conv(document: dict[str, Any], source: str = "doc.json", **options: Any) -> Conversion:
    return convert(parse_document(orjson.dumps(document), source), ConvertOptions(**options))


def by_tool(conversion: Conversion) -> dict[str, OperationSpec]:
    return {op.tool: op for op in conversion.operations}


def ok(description: str = "ok", schema: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description}
    if schema is not None:
        response["content"] = {"application/json": {"schema": schema}}
    return {"200": response}


SWAGGER = {
    "swagger": "2.0",
    "info": {"title": "Old", "version": "1"},
    "host": "api.example.com",
    "basePath": "/v2",
    "schemes": ["http", "https"],
    "consumes": ["application/json"],
    "produces": ["application/json"],
    "paths": {
        "/pets": {
            "get": {
                "operationId": "findPets",
                "parameters": [
                    {
                        "name": "tags",
                        "in": "query",
                        "type": "array",
                        "items": {"type": "string"},
                        "collectionFormat": "multi",
                    },
                    {
                        "name": "ids",
                        "in": "query",
                        "type": "array",
                        "items": {"type": "integer"},
                        "collectionFormat": "pipes",
                    },
                    {
                        "name": "limit",
                        "in": "query",
                        "type": "integer",
                        "minimum": 0,
                        "exclusiveMinimum": True,
                        "default": 20,
                    },
                ],
                "responses": {"200": {"description": "pets", "schema": {"$ref": "#/definitions/PetList"}}},
            },
            "post": {
                "operationId": "addPet",
                "parameters": [
                    {"name": "pet", "in": "body", "required": True, "schema": {"$ref": "#/definitions/Pet"}}
                ],
                "responses": {"200": {"description": "ok", "schema": {"$ref": "#/definitions/Pet"}}},
            },
        },
        "/pets/{id}/photo": {
            "post": {
                "operationId": "uploadPhoto",
                "consumes": ["multipart/form-data"],
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "type": "integer"},
                    {"name": "caption", "in": "formData", "type": "string"},
                    {"name": "file", "in": "formData", "type": "file", "required": True},
                ],
                "responses": {"200": {"description": "ok"}},
            },
        },
        "/login": {
            "post": {
                "operationId": "login",
                "consumes": ["application/x-www-form-urlencoded"],
                "parameters": [
                    {"name": "user", "in": "formData", "type": "string", "required": True},
                    {"name": "remember", "in": "formData", "type": "boolean"},
                ],
                "responses": {"204": {"description": "done"}},
            }
        },
    },
    "definitions": {
        "Pet": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string"},
                "nickname": {"type": "string", "x-nullable": True},
                "age": {"type": "integer", "required": True},
            },
        },
        "PetList": {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"$ref": "#/definitions/Pet"}}},
        },
    },
}


def test_swagger_2_documents_convert() -> None:
    result = conv(SWAGGER)
    assert result.version == "2.0" and result.base_url == "https://api.example.com/v2"
    ops = by_tool(result)
    find = ops["findPets"]
    styles = {p.prop: (p.style, p.explode, p.shape) for p in find.params}
    assert styles == {
        "tags": ("form", True, "array"),
        "ids": ("pipeDelimited", False, "array"),
        "limit": ("form", False, "primitive"),
    }
    assert find.input_schema["properties"]["limit"] == {
        "type": "integer",
        "exclusiveMinimum": 0,
        "default": 20,
    }
    assert find.output_schema is not None and find.output_schema["$defs"]["Pet"]["properties"]["nickname"][
        "type"
    ] == ["string", "null"]
    add = ops["addPet"]
    assert (
        add.body is not None
        and add.body.kind == "json"
        and add.body.fields == {"name": "name", "nickname": "nickname", "age": "age"}
    )
    assert add.input_schema["required"] == ["name"]  # the draft-3 `required: true` on a property is dropped
    assert "required" not in add.input_schema["properties"]["age"]
    login = ops["login"]
    assert login.body is not None and login.body.kind == "form" and login.input_schema["required"] == ["user"]
    assert login.output_schema is None
    assert "uploadPhoto" not in ops
    assert any(
        "file upload" in p.message and p.operation == "uploadPhoto (POST /pets/{id}/photo)"
        for p in result.skipped
    )
    for op in result.operations:
        jsonschema.Draft202012Validator.check_schema(op.input_schema)


OPENAPI_31 = {
    "openapi": "3.1.0",
    "info": {"title": "New", "version": "1"},
    "servers": [
        {
            "url": "https://{region}.example.com/{base}",
            "variables": {"region": {"default": "eu"}, "base": {"default": "api"}},
        }
    ],
    "paths": {
        "/things/{id}": {
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": {
                "operationId": "getThing",
                "parameters": [
                    {
                        "name": "id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "integer"},
                        "description": "Overrides the path-level one",
                    },
                    {
                        "name": "fields",
                        "in": "query",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                ],
                "responses": ok(schema={"$ref": "#/components/schemas/Thing"}),
            },
        },
        "/a": {"get": {"operationId": "a", "responses": ok(schema={"$ref": "#/components/schemas/A"})}},
    },
    "components": {
        "schemas": {
            "Thing": {
                "type": "object",
                "properties": {
                    "name": {"type": ["string", "null"], "examples": ["x"]},
                    "kind": {"const": "thing"},
                    "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
                    "owner": {"$ref": "#/components/schemas/A", "description": "Who owns it"},
                },
            },
            "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
            "B": {"type": "object", "properties": {"a": {"$ref": "#/components/schemas/A"}}},
        }
    },
}


def test_openapi_31_documents_keep_json_schema_features_and_recursion() -> None:
    result = conv(OPENAPI_31)
    assert result.base_url == "https://eu.example.com/api"
    thing = by_tool(result)["getThing"]
    assert thing.input_schema["properties"]["id"] == {
        "type": "integer",
        "description": "Overrides the path-level one",
    }
    assert [p.json for p in thing.params] == [False, True]
    out = thing.output_schema
    assert out is not None
    assert out["properties"]["name"] == {"type": ["string", "null"], "examples": ["x"]}
    assert out["properties"]["kind"] == {"const": "thing"}
    assert out["properties"]["owner"] == {"$ref": "#/$defs/A", "description": "Who owns it"}
    assert set(out["$defs"]) == {"A", "B"}  # mutual recursion: both defined once
    assert out["$defs"]["B"]["properties"]["a"] == {"$ref": "#/$defs/A"}
    jsonschema.Draft202012Validator.check_schema(out)
    validator = jsonschema.Draft202012Validator(out)
    assert validator.is_valid({"owner": {"b": {"a": {}}}})
    assert not validator.is_valid({"owner": {"b": {"a": {"b": 3}}}})


def test_references_that_cannot_be_followed_skip_only_their_operation() -> None:
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/remote": {
                "get": {
                    "operationId": "remote",
                    "parameters": [{"$ref": "https://example.com/params.yaml#/Limit"}],
                    "responses": ok(),
                }
            },
            "/file": {
                "post": {
                    "operationId": "file",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "./schemas.yaml#/Pet"}}},
                    },
                    "responses": ok(),
                }
            },
            "/loop": {
                "get": {
                    "operationId": "loop",
                    "parameters": [{"$ref": "#/components/parameters/L1"}],
                    "responses": ok(),
                }
            },
            "/missing": {
                "get": {
                    "operationId": "missing",
                    "parameters": [{"$ref": "#/components/parameters/Nope"}],
                    "responses": ok(),
                }
            },
            "/fine": {"get": {"operationId": "fine", "responses": ok()}},
        },
        "components": {
            "parameters": {
                "L1": {"$ref": "#/components/parameters/L2"},
                "L2": {"$ref": "#/components/parameters/L1"},
            }
        },
    }
    result = conv(document)
    assert [op.tool for op in result.operations] == ["fine"]
    reasons = {p.operation: (p.pointer, p.message) for p in result.skipped}
    assert "never fetched" in reasons["remote (GET /remote)"][1]
    assert reasons["remote (GET /remote)"][0] == "/paths/~1remote/get/parameters/0"
    assert "never fetched" in reasons["file (POST /file)"][1]
    assert "$ref loop" in reasons["loop (GET /loop)"][1]
    assert "does not resolve" in reasons["missing (GET /missing)"][1]


def test_include_and_exclude_by_operation_id_tag_and_path() -> None:
    document = {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/repos/{o}": {
                "get": {
                    "operationId": "repos/get",
                    "tags": ["repos"],
                    "parameters": [
                        {"name": "o", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": ok(),
                },
                "delete": {
                    "operationId": "repos/delete",
                    "tags": ["repos"],
                    "parameters": [
                        {"name": "o", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": ok(),
                },
            },
            "/issues": {"get": {"operationId": "issues/list", "tags": ["issues"], "responses": ok()}},
            "/users": {"get": {"operationId": "users/list", "tags": ["users"], "responses": ok()}},
        },
    }
    names = lambda **o: sorted(op.tool for op in conv(document, **o).operations)  # noqa: E731
    assert names(include=["tag:repos"]) == ["repos_delete", "repos_get"]
    assert names(include=["tag:repos"], exclude=["*/delete"]) == ["repos_get"]
    assert names(include=["path:/issues", "id:users/*"]) == ["issues_list", "users_list"]
    result = conv(document, exclude=["tag:repos", "path:/users"])
    assert [op.tool for op in result.operations] == ["issues_list"] and result.filtered == 3


def test_names_fit_the_room_left_by_the_namespace_and_never_collide() -> None:
    long_id = "x" * 80
    document = {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/a": {
                "get": {"operationId": long_id, "responses": ok()},
                "post": {"operationId": long_id + "y", "responses": ok()},
            },
            "/b": {
                "get": {"operationId": "same name", "responses": ok()},
                "post": {"operationId": "same/name", "responses": ok()},
            },
            "/c/{id}.json": {
                "get": {
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": ok(),
                }
            },
        },
    }
    ops = conv(document, name_room=40).operations
    names = [op.tool for op in ops]
    assert len(set(names)) == len(names) and all(len(n) <= 40 for n in names)
    assert names[0] != names[1] and names[0].startswith("x" * 30)
    assert names[2:] == ["same_name", "same_name_2", "get_c_id_json"]
    again = [op.tool for op in conv(document, name_room=40).operations]
    assert again == names  # deterministic


def test_annotations_follow_the_method() -> None:
    document = {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/x": {
                m: {"operationId": m, "responses": ok()}
                for m in ("get", "put", "post", "delete", "patch", "head")
            }
        },
    }
    ops = by_tool(conv(document))
    assert ops["get"].annotations["readOnlyHint"] is True and ops["head"].annotations["readOnlyHint"] is True
    assert ops["delete"].annotations == {
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": True,
    }
    assert ops["put"].annotations["idempotentHint"] is True
    assert "readOnlyHint" not in ops["post"].annotations and "readOnlyHint" not in ops["patch"].annotations


def test_a_yaml_alias_bomb_costs_bounded_time() -> None:
    lines = ["a0: &a0 {type: string}"]
    for level in range(1, 25):
        previous = f"*a{level - 1}"
        lines.append(
            f"a{level}: &a{level} {{type: object, properties: {{p1: {previous}, p2: {previous}, p3: {previous}}}}}"
        )
    bomb = "\n".join(lines)
    document = (
        "openapi: 3.0.0\ninfo: {title: t, version: '1'}\n"
        "x-anchors:\n" + "\n".join("  " + line for line in bomb.splitlines()) + "\n"
        "paths:\n  /b:\n    post:\n      operationId: bomb\n      requestBody:\n        required: true\n"
        "        content:\n          application/json:\n            schema: *a24\n      responses: {'200': {description: ok}}\n"
        "  /ok:\n    get:\n      operationId: fine\n      responses: {'200': {description: ok}}\n"
    )
    started = time.perf_counter()
    result = convert(parse_document(document.encode(), "bomb.yaml"))
    assert time.perf_counter() - started < 5
    assert [op.tool for op in result.operations] == ["fine"]
    assert "too large" in result.skipped[0].message


def test_documents_that_are_not_openapi_are_refused_with_the_reason() -> None:
    import pytest

    from toolweave.backends.openapi import DocumentUnusable

    for raw, reason in (
        (b"[1, 2]", "top level is not a mapping"),
        (b'{"swagger": "1.2"}', "swagger '1.2' is not supported"),
        (b'{"openapi": "4.0.0"}', "openapi '4.0.0' is not supported"),
        (b"a: [", "neither JSON nor valid YAML"),
    ):
        with pytest.raises(DocumentUnusable, match=reason):
            parse_document(raw, "x")
    assert yaml  # the YAML path is exercised above
