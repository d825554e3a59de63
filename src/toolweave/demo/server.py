"""A stdio MCP demo server (`toolweave-demo-server`): docs search and two offline "scrapers".

Everything is deterministic and local, so the demo gateway works without a
network: the scrapers describe what they would fetch instead of fetching it.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlparse

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

server = MCPServer("toolweave-demo")

DOCS = {
    "https://docs.example.com/gateway": "toolweave puts one gateway in front of many MCP servers.",
    "https://docs.example.com/composites": "Composite tools: fan-out, routers and workflows.",
    "https://docs.example.com/deploy": "Deploy with the deploy_and_verify workflow, then check health.",
}
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


@server.tool(annotations=READ_ONLY)
def search(
    query: Annotated[str, Field(description="Words to look for in the docs")], limit: int = 3
) -> dict[str, Any]:
    """Search the product documentation."""
    words = query.lower().split()
    hits = [
        {"url": url, "snippet": text} for url, text in DOCS.items() if any(w in text.lower() for w in words)
    ]
    return {"source": "docs", "query": query, "hits": hits[:limit]}


@server.tool(annotations=READ_ONLY)
def scrape_profile(
    profile_url: Annotated[str, Field(description="A linkedin.com profile URL")],
) -> dict[str, Any]:
    """Scrape a LinkedIn profile (offline demo: returns a canned profile)."""
    handle = urlparse(profile_url).path.rstrip("/").split("/")[-1] or "unknown"
    return {"scraper": "linkedin", "profile": handle, "headline": f"{handle} works on agents"}


@server.tool(annotations=READ_ONLY)
def scrape(
    url: Annotated[str, Field(description="The URL of any web page to scrape (http or https)")],
    format: Annotated[str, Field(description="markdown or text")] = "markdown",
) -> dict[str, Any]:
    """Scrape any web page (offline demo: describes the page)."""
    host = urlparse(url).netloc or "unknown"
    return {
        "scraper": "generic",
        "url": url,
        "format": format,
        "content": f"# {host}\n(offline demo content)",
    }


@server.tool(annotations=READ_ONLY)
def health(service: Annotated[str, Field(description="Service name")] = "api") -> dict[str, Any]:
    """Report the health of a service (always healthy in the demo)."""
    return {"service": service, "ok": True}


def main() -> None:
    server.run("stdio")


if __name__ == "__main__":
    main()
