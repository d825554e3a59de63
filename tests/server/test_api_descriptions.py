"""`POST /composite-tools/{id}/regenerate-description`: the deterministic mini-prompt, and the optional
OpenAI-compatible LLM rewrite (against a fake endpoint on loopback), which never blocks editing."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from support.api import SCRAPER, AppFactory
from support.configs import stdio_backend
from support.serving import serve_asgi

pytestmark = pytest.mark.usefixtures("in_process_testserver")
"""The descriptions are the subject: the test server behind the API runs in-process."""

API = "/api/v1"
LLM_TEXT = (
    "Use this tool to scrape a web page.\n\n# Required inputs (always include these):\n- url: the page."
)


def fake_llm(received: list[dict[str, Any]], *, status: int = 200) -> Starlette:
    async def completions(request: Request) -> JSONResponse:
        received.append({"body": await request.json(), "auth": request.headers.get("authorization")})
        if status != 200:
            return JSONResponse({"error": "down"}, status_code=status)
        return JSONResponse(
            {"choices": [{"message": {"role": "assistant", "content": f"```\n{LLM_TEXT}\n```"}}]}
        )

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


async def test_regenerated_deterministically_from_the_operations(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [stdio_backend()]})
    long_own = {
        **SCRAPER,
        "description": "Scrape pages.\n\n# Required inputs (always include these):\n- stale: gone",
    }
    async with api.client() as client:
        await client.post(f"{API}/composite-tools", json={"definition": long_own})
        served = (await client.get(f"{API}/composite-tools/smart_scraper")).json()["tool"]["description"]
        assert "stale" in served  # a complete mini-prompt of the user's is served verbatim
        preview = await client.post(
            f"{API}/composite-tools/smart_scraper/regenerate-description", json={"save": False}
        )
        body = preview.json()
        assert preview.status_code == 200 and body["source"] == "generated" and body["saved"] is False
        text = body["description"]
        assert text.startswith("Use this tool to scrape pages.") and "stale" not in text
        assert "# Required inputs" in text and "linkedin" in text and "generic" in text
        again = (
            await client.post(
                f"{API}/composite-tools/smart_scraper/regenerate-description", json={"save": False}
            )
        ).json()
        assert again["description"] == text  # deterministic
        saved = (await client.post(f"{API}/composite-tools/smart_scraper/regenerate-description")).json()
        assert saved["saved"] and saved["version"] == 2
        current = (await client.get(f"{API}/composite-tools/smart_scraper")).json()
        assert current["definition"]["description"] == text and current["tool"]["description"] == text


async def test_an_llm_endpoint_rewrites_it_when_configured(
    sqlite_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[dict[str, Any]] = []
    async with serve_asgi(fake_llm(received)) as base:
        monkeypatch.setenv("TOOLWEAVE_LLM_BASE_URL", f"{base}/v1")
        monkeypatch.setenv("TOOLWEAVE_LLM_MODEL", "tiny-test-model")
        monkeypatch.setenv("TOOLWEAVE_LLM_API_KEY", "llm-key-123")
        api = await sqlite_app({"backends": [stdio_backend()]})
        async with api.client() as client:
            await client.post(f"{API}/composite-tools", json={"definition": SCRAPER})
            done = (await client.post(f"{API}/composite-tools/smart_scraper/regenerate-description")).json()
            assert done["source"] == "llm" and done["description"] == LLM_TEXT and done["saved"]
            current = (await client.get(f"{API}/composite-tools/smart_scraper")).json()
            assert current["tool"]["description"] == LLM_TEXT
            skipped = (
                await client.post(
                    f"{API}/composite-tools/smart_scraper/regenerate-description",
                    json={"useLlm": False, "save": False},
                )
            ).json()
            assert skipped["source"] == "generated"
    request = received[0]
    assert request["auth"] == "Bearer llm-key-123" and request["body"]["model"] == "tiny-test-model"
    prompt = request["body"]["messages"][1]["content"]
    assert "smart_scraper" in prompt and "# Required inputs" in prompt and '"url"' in prompt


async def test_a_failing_llm_endpoint_falls_back_with_a_warning(
    sqlite_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[dict[str, Any]] = []
    async with serve_asgi(fake_llm(received, status=503)) as base:
        monkeypatch.setenv("TOOLWEAVE_LLM_BASE_URL", f"{base}/v1")
        monkeypatch.setenv("TOOLWEAVE_LLM_MODEL", "tiny-test-model")
        api = await sqlite_app({"backends": [stdio_backend()]})
        async with api.client() as client:
            await client.post(f"{API}/composite-tools", json={"definition": SCRAPER})
            done = (await client.post(f"{API}/composite-tools/smart_scraper/regenerate-description")).json()
    assert done["source"] == "generated" and "HTTP 503" in done["warning"] and done["saved"]
    assert received
