"""The demo config (examples/demo.toml) end to end: its fan-out `search_all` and router `smart_scraper`
called through `Gateway` with the real demo backends (in-process notes, stdio docs server, mcp-server-time)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from support.paths import ROOT
from support.results import meta, sections, texts
from toolweave import Gateway

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEMO = ROOT / "examples" / "demo.toml"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def demo(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    database = Path(tmp_path_factory.mktemp("demo")) / "demo.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOOLWEAVE_DEMO_DB", str(database))
        gateway = Gateway.from_config(DEMO)
    assert gateway.config.gateway.database == f"sqlite:///{database}"
    async with gateway:
        assert all(b["status"] == "connected" for b in gateway.describe_backends()), (
            gateway.describe_backends()
        )
        assert gateway.catalog.degraded == {}, gateway.catalog.issues
        yield gateway


async def test_demo_lists_its_fanout_and_router(demo: Gateway) -> None:
    tools = {tool.name: tool for tool in demo.list_tools()}
    assert {"search_all", "smart_scraper", "research_note", "quick_note"} <= set(tools)
    assert tools["search_all"].input_schema["required"] == ["query"]
    assert tools["smart_scraper"].input_schema["required"] == ["url"]
    url = tools["smart_scraper"].input_schema["properties"]["url"]
    assert url["description"] == "The URL of any web page to scrape (http or https)"  # fits both scrapers
    assert "operation" not in tools["smart_scraper"].input_schema["properties"]


async def test_demo_search_all(demo: Gateway) -> None:
    result = await demo.call("search_all", {"query": "deploy"})
    assert not result.is_error, texts(result)
    assert sorted(sections(result)[0::2]) == ["## docs__search", "## notes__search"]
    by_tool = {r["tool"]: r["structuredContent"] for r in result.structured_content["results"]}
    assert by_tool["notes__search"]["hits"] == [{"id": "n1", "title": "Deploy checklist"}]
    assert by_tool["docs__search"]["hits"][0]["url"] == "https://docs.example.com/deploy"
    assert meta(result)["kind"] == "fanout"
    assert {t["status"] for t in meta(result)["targets"]} == {"completed"}


@pytest.mark.parametrize(
    ("url", "operation", "tool", "reason", "scraper"),
    [
        (
            "https://www.linkedin.com/in/johndoe",
            "linkedin-scraper",
            "docs__scrape_profile",
            "url contains 'linkedin.com'",
            "linkedin",
        ),
        ("https://example.com/page", "generic", "docs__scrape", "default operation", "generic"),
    ],
)
async def test_demo_smart_scraper(
    demo: Gateway, url: str, operation: str, tool: str, reason: str, scraper: str
) -> None:
    result = await demo.call("smart_scraper", {"url": url})
    assert not result.is_error, texts(result)
    assert result.structured_content["scraper"] == scraper
    assert (meta(result)["operation"], meta(result)["tool"], meta(result)["reason"]) == (
        operation,
        tool,
        reason,
    )


async def test_demo_quick_note_takes_the_default_title_when_nobody_can_be_asked(demo: Gateway) -> None:
    """The Python API has no client to ask: the elicitation step's defaultResponse names the note."""
    result = await demo.call("quick_note", {"body": "Fridays 14:00-16:00"})
    assert not result.is_error, texts(result)
    assert result.structured_content["title"] == "Untitled"
    ask = next(step for step in meta(result)["steps"] if step["id"] == "ask")
    assert ask["status"] == "completed"
    saved = await demo.call("notes__get_note", {"note_id": result.structured_content["id"]})
    assert saved.structured_content["body"] == "Fridays 14:00-16:00"
