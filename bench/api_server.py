"""The REST API of scenario I: `python bench/api_server.py --port N` (uvicorn + Starlette, loopback).

One JSON endpoint, `GET /pets/{id}`, and its OpenAPI document at `/openapi.json`:
the same call is made directly with an HTTP client and through toolweave.
"""

from __future__ import annotations

import argparse

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

DOCUMENT = {
    "openapi": "3.0.3",
    "info": {"title": "bench pets", "version": "1"},
    "paths": {
        "/pets/{id}": {
            "get": {
                "operationId": "getPet",
                "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}],
                "responses": {
                    "200": {
                        "description": "A pet",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["id", "name"],
                                    "properties": {
                                        "id": {"type": "integer"},
                                        "name": {"type": "string"},
                                        "tags": {"type": "array", "items": {"type": "string"}},
                                    },
                                }
                            }
                        },
                    }
                },
            }
        }
    },
}


async def pet(request: Request) -> JSONResponse:
    return JSONResponse({"id": int(request.path_params["id"]), "name": "Rex", "tags": ["good", "dog"]})


async def document(_request: Request) -> JSONResponse:
    return JSONResponse(DOCUMENT)


app = Starlette(routes=[Route("/pets/{id:int}", pet), Route("/openapi.json", document)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
