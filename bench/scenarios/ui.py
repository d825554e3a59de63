"""J: the web UI's AI Tools list with 300 tools (3 backends x 100) and 1,000 (4 x 250), warm.

Side by side in interleaved rounds: a raw MCP `tools/list` of the same 300 tools (the
gateway's fastest answer about them), the REST `GET /api/v1/ai-tools`, the UI list page
`GET /` (first page of 50, counts per type over all 300) and a search `GET /?q=...` (ranked
with the find_tools index); then the same list page, its last page and a search on a second
gateway that sees 1,000 tools, so the growth with the catalog is read within one run. Each
is one HTTP request over a kept-alive loopback connection with a client that does not parse
the body, so the latency is the gateway's own time.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import httpx2

from bench.configs import http_backend
from bench.core import Bench, ScenarioResult
from bench.gateway import GatewayRun, exposed
from bench.load import CallFn, Target, compare
from bench.procs import start_backends
from bench.rawclient import raw_client, raw_list_tools
from bench.scenarios._common import stop_gateway, try_gateway
from bench.scenarios.catalog import BACKENDS, CORE_TOOLS, TOOLS_PER_BACKEND


class PageClient:
    """GETs on one kept-alive connection; the body is read, not parsed."""

    def __init__(self, base: str) -> None:
        self.base = base
        self._http: httpx2.AsyncClient | None = None

    async def __aenter__(self) -> PageClient:
        self._http = httpx2.AsyncClient(base_url=self.base, timeout=httpx2.Timeout(30.0))
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._http is not None:
            await self._http.aclose()

    async def get(self, path: str, must_contain: bytes) -> bytes:
        assert self._http is not None
        response = await self._http.get(path)
        body = response.content
        if response.status_code != 200 or must_contain not in body:
            raise RuntimeError(f"GET {path}: {response.status_code}, {len(body)} bytes")
        return body


def page(path: str, must_contain: bytes) -> CallFn:
    async def call(client: Any) -> Any:
        return await client.get(path, must_contain)

    return call


LARGE_BACKENDS = 4
LARGE_TOOLS_PER_BACKEND = 250
PAGE_SIZE = 50
"""The list's page size (catalog_view), to name the last page of the 1,000-tool list."""


def _base(run: GatewayRun) -> str:
    return run.url.rsplit("/mcp", 1)[0]


def _large_targets(run: GatewayRun) -> list[Target]:
    total = LARGE_BACKENDS * LARGE_TOOLS_PER_BACKEND
    last_page = -(-total // PAGE_SIZE)
    pages = lambda: PageClient(_base(run))  # noqa: E731 - a factory, as Target wants
    return [
        Target(
            f"UI GET / (1,000 tools, page 1 of {last_page})", pages, page("/", b"data-tool="), pid=run.pid
        ),
        Target(
            f"UI GET /?page={last_page} (1,000 tools, last page)",
            pages,
            page(f"/?page={last_page}", b"data-tool="),
            pid=run.pid,
        ),
        Target(
            "UI GET /?q=dummy (1,000 tools, ranked)",
            pages,
            page("/?q=dummy+tool", b"data-tool="),
            pid=run.pid,
        ),
    ]


async def _large_gateway(bench: Bench) -> tuple[list[Any], GatewayRun | str]:
    """Backends and a gateway seeing 1,000 tools (the bench backend's core tools included)."""
    extra = LARGE_TOOLS_PER_BACKEND - CORE_TOOLS
    names = [f"uk{i}" for i in range(1, LARGE_BACKENDS + 1)]
    backends = start_backends(bench.group, names, extra_tools=extra)
    urls = [b.url for b in backends if b.url]
    config = [http_backend(f"k{i}", url) for i, url in enumerate(urls, start=1)]
    expected = [exposed(f"k{i}", "dummy_000") for i in range(1, LARGE_BACKENDS + 1)]
    return backends, await try_gateway(bench, "j1000", config, expected)


def _targets(run: GatewayRun) -> list[Target]:
    base = _base(run)
    total = BACKENDS * TOOLS_PER_BACKEND
    pages = lambda: PageClient(base)  # noqa: E731 - a factory, as Target wants
    last = exposed(f"c{BACKENDS}", "dummy_000").encode()
    return [
        Target("MCP tools/list, raw (300 tools)", raw_client(run.url), raw_list_tools(total), pid=run.pid),
        Target("REST GET /api/v1/ai-tools (300 tools)", pages, page("/api/v1/ai-tools", last), pid=run.pid),
        Target("UI GET / (300 tools, page 1 of 6)", pages, page("/", b'data-tool="c1__'), pid=run.pid),
        Target("UI GET /?q=dummy (ranked search)", pages, page("/?q=dummy+tool", b"data-tool="), pid=run.pid),
    ]


async def scenario_j(bench: Bench) -> ScenarioResult:
    result = ScenarioResult("J", "web UI: the AI Tools list with 300 and 1,000 tools, warm")
    extra = TOOLS_PER_BACKEND - CORE_TOOLS
    backends = start_backends(bench.group, [f"ui{i}" for i in range(1, BACKENDS + 1)], extra_tools=extra)
    urls = [b.url for b in backends if b.url]
    config = [http_backend(f"c{i}", url) for i, url in enumerate(urls, start=1)]
    expected = [exposed(f"c{i}", "dummy_000") for i in range(1, BACKENDS + 1)]
    run = await try_gateway(bench, "j", config, expected)
    large_backends, large = await _large_gateway(bench)
    try:
        if isinstance(run, str):
            return result.skip(run)
        if isinstance(large, str):
            return result.skip(large)
        targets = _targets(run) + _large_targets(large)
        measured = await compare(
            targets,
            concurrency=1,
            calls=bench.settings.n(24, 300),
            warmup=3,
            rounds=bench.settings.rounds,
            max_seconds=bench.settings.budget_s,
        )
        result.add_rows(measured, note="GET, warm, c=1")
        m = result.metrics
        m["tools_list_raw_ms_p50"] = measured[targets[0].label].p50
        m["api_ai_tools_ms_p50"] = measured[targets[1].label].p50
        m["ui_list_ms_p50_300_tools"] = measured[targets[2].label].p50
        m["ui_search_ms_p50_300_tools"] = measured[targets[3].label].p50
        m["ui_list_vs_tools_list"] = m["ui_list_ms_p50_300_tools"] / max(m["tools_list_raw_ms_p50"], 1e-9)
        m["ui_list_ms_p50_1000_tools"] = measured[targets[4].label].p50
        m["ui_list_last_page_ms_p50_1000_tools"] = measured[targets[5].label].p50
        m["ui_search_ms_p50_1000_tools"] = measured[targets[6].label].p50
        m["ui_list_1000_vs_300"] = m["ui_list_ms_p50_1000_tools"] / max(m["ui_list_ms_p50_300_tools"], 1e-9)
    finally:
        stop_gateway(bench, run)
        stop_gateway(bench, large)
        for backend in [*backends, *large_backends]:
            bench.group.stop(backend)
    return result
