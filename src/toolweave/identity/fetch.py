"""Bounded HTTP for identity: discovery documents, key sets and introspection answers are read with
a deadline and a size cap, so a huge or slow issuer costs a bounded amount and fails closed."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import orjson

from toolweave.identity.errors import IssuerUnavailable

MAX_DOCUMENT_BYTES = 256 * 1024
"""Largest discovery document, key set or introspection answer read (real ones are a few KiB)."""
FETCH_SECONDS = 5.0
"""How long one fetch may take, connection to last byte."""


async def fetch_json(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    data: dict[str, str] | None = None,
    auth: tuple[str, str] | None = None,
    max_bytes: int = MAX_DOCUMENT_BYTES,
    seconds: float = FETCH_SECONDS,
) -> dict[str, Any]:
    """The JSON object at `url`; `IssuerUnavailable` naming what went wrong otherwise."""
    try:
        async with asyncio.timeout(seconds):
            return await _read(client, method, url, data, auth, max_bytes)
    except TimeoutError:
        raise IssuerUnavailable(f"{url} did not answer within {seconds:g} s") from None
    except httpx.HTTPError as error:
        raise IssuerUnavailable(f"{url} cannot be reached ({type(error).__name__}: {error})") from None


async def _read(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    data: dict[str, str] | None,
    auth: tuple[str, str] | None,
    max_bytes: int,
) -> dict[str, Any]:
    headers = {"accept": "application/json"}
    async with client.stream(method, url, data=data, auth=auth, headers=headers) as response:
        if response.status_code != 200:
            raise IssuerUnavailable(f"{url} answered HTTP {response.status_code}")
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > max_bytes:
            raise IssuerUnavailable(f"{url} answered {declared} bytes, more than the {max_bytes} read")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > max_bytes:
                raise IssuerUnavailable(f"{url} answered more than the {max_bytes} bytes read")
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise IssuerUnavailable(f"{url} did not answer JSON") from None
    if not isinstance(document, dict):
        raise IssuerUnavailable(f"{url} did not answer a JSON object")
    return document
