"""Finding 9 of hardening II: what the embeddings (and LLM) endpoint answers is read with a ceiling.

As found: the embeddings endpoint's answer was read whole (`response.json()`): an 800 MiB answer
took the gateway from ~50 MB to 2.5 GB, again on every retry. Now it is streamed and abandoned
past `[search.embeddings] max_response_bytes` (an `EmbeddingError` naming the setting: the lexical
ranking serves), like an HTTP backend's answer past its `max_response_bytes`; the LLM endpoint
that rewrites descriptions is held to `services.llm.MAX_ANSWER_BYTES`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from support.serving import serve_asgi
from toolweave.catalog.semantic import EmbeddingError, SemanticRanker
from toolweave.config.models import EmbeddingsConfig
from toolweave.services import llm

CHUNKS = 64


def huge_answers(sent: list[int]) -> Starlette:
    """Valid but huge answers: each vector or description is 64 chunks of 64 KiB (4 MiB)."""

    async def body(prefix: bytes, suffix: bytes) -> AsyncIterator[bytes]:
        yield prefix
        for index in range(CHUNKS):
            sent.append(index)
            yield (b"0.5," * (16 << 10)) if b"embedding" in prefix else b"x" * (64 << 10)
        yield suffix

    async def embeddings(request: Request) -> StreamingResponse:
        texts = (await request.json())["input"]
        assert len(texts) == 1
        return StreamingResponse(
            body(b'{"data": [{"index": 0, "embedding": [', b"1.0]}]}"), media_type="application/json"
        )

    async def completions(request: Request) -> StreamingResponse:
        return StreamingResponse(
            body(b'{"choices": [{"message": {"content": "', b'"}}]}'), media_type="application/json"
        )

    return Starlette(
        routes=[
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/chat/completions", completions, methods=["POST"]),
        ]
    )


async def test_an_embeddings_answer_past_the_limit_is_refused_naming_the_setting() -> None:
    sent: list[int] = []
    async with serve_asgi(huge_answers(sent)) as base:
        config = EmbeddingsConfig(url=f"{base}/v1", model="m", max_response_bytes=1 << 20)
        ranker = SemanticRanker(config)
        try:
            with pytest.raises(EmbeddingError, match=r"max_response_bytes"):
                await ranker._embed(["one text"], {})
        finally:
            await ranker.close()


async def test_an_llm_answer_past_the_limit_keeps_the_generated_description(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[int] = []
    async with serve_asgi(huge_answers(sent)) as base:
        monkeypatch.setenv(llm.BASE_URL_ENV, f"{base}/v1")
        monkeypatch.setenv(llm.MODEL_ENV, "m")
        rewritten = await llm.rewrite("Draft.", "tool", {"type": "object"})
    assert rewritten.source == "generated" and "larger than" in (rewritten.warning or ""), rewritten.source
    assert len(orjson.dumps(rewritten.text)) < 1000
