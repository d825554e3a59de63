"""An issuer's answers are read with a deadline and a size cap: a huge or slow key set, discovery
document or introspection answer is cut off (and its issuer's tokens fail closed)."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from support.serving import serve_asgi
from toolweave.identity.errors import IssuerUnavailable
from toolweave.identity.fetch import fetch_json


async def huge(_request: Request) -> Response:
    async def chunks():  # type: ignore[no-untyped-def]
        for _ in range(64):  # 4 MiB, no content-length
            yield b"x" * 65536

    return StreamingResponse(chunks(), media_type="application/json")


async def declared(_request: Request) -> Response:
    return Response(b"{}", headers={"content-length": "2"}, media_type="application/json")


async def slow(_request: Request) -> Response:
    await asyncio.sleep(1.5)
    return Response(b"{}", media_type="application/json")


async def not_json(_request: Request) -> Response:
    return Response(b"<html>", media_type="text/html")


APP = Starlette(
    routes=[Route("/huge", huge), Route("/slow", slow), Route("/html", not_json), Route("/ok", declared)]
)


async def test_huge_slow_and_foreign_answers_are_cut_off() -> None:
    async with serve_asgi(APP, lifespan="off") as base, httpx.AsyncClient() as client:
        assert await fetch_json(client, "GET", f"{base}/ok") == {}
        with pytest.raises(IssuerUnavailable, match="more than the 1024 bytes read"):
            await fetch_json(client, "GET", f"{base}/huge", max_bytes=1024)
        with pytest.raises(IssuerUnavailable, match=r"did not answer within 0\.3 s"):
            await fetch_json(client, "GET", f"{base}/slow", seconds=0.3)
        with pytest.raises(IssuerUnavailable, match="did not answer JSON"):
            await fetch_json(client, "GET", f"{base}/html")
        with pytest.raises(IssuerUnavailable, match="answered HTTP 404"):
            await fetch_json(client, "GET", f"{base}/missing")
