"""Document validation with openapi-spec-validator: every problem with its pointer and operation, nothing fetched."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from typing import Any

from toolweave.backends.http.backend import _validate_in_child
from toolweave.backends.openapi.validation import validate_document

BROKEN: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "broken", "version": "1"},
    "paths": {
        "/pets/{petId}": {
            "get": {
                "operationId": "getPet",
                "parameters": [
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "default": "ten"}}
                ],
                "responses": {"200": {"description": "ok"}},
            },
            "post": {"operationId": "getPet", "responses": {"200": {"description": "ok"}}},
        },
        "/a": {
            "get": {
                "parameters": [{"name": "x", "in": "nowhere"}],
                "responses": {"200": {"description": "ok"}},
            }
        },
        "/b": {
            "get": {
                "operationId": "dangling",
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Missing"}}},
                    }
                },
            }
        },
    },
    "components": {"schemas": {"Bad": {"type": "string", "default": 5}}},
}


def test_every_problem_has_its_pointer_and_operation() -> None:
    problems = [((p.pointer, p.operation), p.message) for p in validate_document(BROKEN)]
    assert any(key == ("/paths/~1a/get/parameters/0", "GET /a") for key, _ in problems)
    assert any(op == "getPet (POST /pets/{petId})" and "not unique" in msg for (_, op), msg in problems)
    assert any(op == "getPet (GET /pets/{petId})" and "petId" in msg for (_, op), msg in problems)
    assert any(
        op == "getPet (GET /pets/{petId})" and "'ten' is not of type 'integer'" in msg
        for (_, op), msg in problems
    )
    dangling = [msg for (_, op), msg in problems if op == "dangling (GET /b)"]
    assert dangling and "Missing" in dangling[0]
    assert any(pointer == "/components/schemas/Bad" for (pointer, _), _ in problems)
    for (pointer, _), message in problems:
        assert pointer.startswith("/") and message and "\n" not in message


@contextlib.contextmanager
def counting_server() -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


async def test_remote_references_are_never_fetched_by_the_validator() -> None:
    with counting_server() as (url, hits):
        document = {
            "openapi": "3.0.3",
            "info": {"title": "remote", "version": "1"},
            "paths": {
                "/r": {
                    "get": {
                        "operationId": "remote",
                        "responses": {
                            "200": {
                                "description": "ok",
                                "content": {"application/json": {"schema": {"$ref": f"{url}/schema.json"}}},
                            }
                        },
                    }
                }
            },
        }
        problems = validate_document(document)
        child = await _validate_in_child(document)
        assert hits == []
    for found in (problems, child):
        assert any(p.operation == "remote (GET /r)" and "never fetched" in p.message for p in found), found


async def test_the_child_process_reports_what_the_library_reports() -> None:
    here = sorted(str(p) for p in validate_document(BROKEN))
    there = sorted(str(p) for p in await _validate_in_child(BROKEN))
    assert here == there and len(here) >= 5
    assert (
        await _validate_in_child({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": {}})
        == []
    )
