"""Reading an HTTP answer with a ceiling: what a remote server sends never decides our memory.

Every answer the gateway reads from a server it does not control — an HTTP API backend, the
embeddings endpoint, the LLM endpoint that rewrites descriptions — is read as a stream and
abandoned past a limit, instead of `response.json()` on whatever arrived (an 800 MiB answer took the
gateway from ~50 MB to 2.5 GB).
"""

from __future__ import annotations

from typing import Any


async def read_bounded(response: Any, limit: int) -> bytes | None:
    """The body of a streamed httpx response, or None when it is (or announces itself) larger than `limit`."""
    length = response.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
