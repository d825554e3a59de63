"""An MCP server for the test suite: stdio by default, streamable HTTP with `--http PORT`.

Tools cover what the gateway must handle: plain results, structured results,
errors, slowness, crashes mid-call, garbage on stdout, big results, and a
tool list that changes at run time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

NAME = os.environ.get("TESTSERVER_NAME", "testserver")
server = MCPServer(NAME)
_counter = {"value": 0}
_journal: list[dict[str, Any]] = []


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> dict[str, int]:
    """Add two integers."""
    return {"sum": a + b}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def search(query: Annotated[str, Field(description="What to look for")], limit: int = 3) -> str:
    """Search the test corpus."""
    return f"{NAME} results for {query!r} (limit {limit})"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def sleep(seconds: float, label: str = "") -> dict[str, Any]:
    """Sleep, then report when it started and ended (for overlap checks)."""
    start = time.time()
    await asyncio.sleep(seconds)
    return {"label": label, "start": start, "end": time.time()}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail(message: str = "it failed") -> str:
    """Always fails with the given message."""
    raise ToolError(message)


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def increment(by: int = 1) -> dict[str, int]:
    """Increment a process-wide counter (a mutating tool)."""
    _counter["value"] += by
    return {"value": _counter["value"]}


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
async def slow_write(seconds: float = 0.0, label: str = "") -> dict[str, Any]:
    """A mutating tool that takes a while, then reports when it started and ended (for admission checks)."""
    start = time.time()
    await asyncio.sleep(seconds)
    _counter["value"] += 1
    entry = {"label": label, "start": start, "end": time.time(), "value": _counter["value"]}
    _journal.append(entry)
    return entry


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def journal() -> dict[str, Any]:
    """Every slow_write this process has done, in completion order (for serialisation checks)."""
    return {"writes": list(_journal)}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def counter() -> dict[str, int]:
    """Read the process-wide counter."""
    return {"value": _counter["value"]}


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_everything(confirm: bool = False) -> str:
    """A destructive tool (does nothing)."""
    return "deleted nothing"


@server.tool()
def crash() -> str:
    """Exit the process in the middle of the call."""
    sys.stdout.flush()
    os._exit(3)


@server.tool()
def garbage() -> str:
    """Write bytes that are not JSON-RPC to stdout, then answer."""
    sys.stdout.write("this is not json\n")
    sys.stdout.flush()
    return "answered after garbage"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def big(kilobytes: int = 100) -> str:
    """Return a result of the given size."""
    return "x" * (kilobytes * 1024)


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Register a new tool at run time and notify the client (list_changed)."""

    def dynamic() -> str:
        return f"I am {name}"

    server.add_tool(dynamic, name=name, description=f"Added at run time: {name}")
    await ctx.notify_tools_changed()  # 2026-07-28 clients listen through subscriptions/listen
    with contextlib.suppress(Exception):  # handshake-era clients get the notification
        await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
def secret_echo(
    password: Annotated[str, Field(json_schema_extra={"format": "password", "writeOnly": True})],
) -> str:
    """Takes a secret, returns its length."""
    return f"length {len(password)}"


# -- scrapers shaped like seed 002's examples (offline: they report what they were asked) --------
_SCRAPED = ToolAnnotations(read_only_hint=True, open_world_hint=False)


@server.tool(annotations=_SCRAPED)
def scrape_profile(
    profile_url: Annotated[str, Field(description="A linkedin.com profile URL")],
    include_metadata: Annotated[bool, Field(description="Include the profile's metadata")] = True,
) -> dict[str, Any]:
    """Scrape a LinkedIn profile."""
    return {"scraper": "linkedin", "server": NAME, "url": profile_url, "include_metadata": include_metadata}


@server.tool(annotations=_SCRAPED)
def scrape(
    url: Annotated[str, Field(description="Any web page URL")],
    format: Annotated[Literal["markdown", "html", "text"], Field(description="Output format")] = "markdown",
) -> dict[str, Any]:
    """Scrape any web page."""
    return {"scraper": "generic", "server": NAME, "url": url, "format": format}


@server.tool(annotations=_SCRAPED)
def fetch_post(
    reddit_url: Annotated[str, Field(description="A reddit.com post URL")],
    format: Annotated[
        Literal["markdown", "json"],
        Field(description="How to render the post: markdown to read it, json for its raw fields"),
    ] = "markdown",
) -> dict[str, Any]:
    """Fetch a Reddit post."""
    return {"scraper": "reddit", "server": NAME, "url": reddit_url, "format": format}


@server.tool(annotations=_SCRAPED)
def fetch_business(
    yelp_url: Annotated[str, Field(description="A yelp.com business URL")],
    api_key: Annotated[
        str,
        Field(
            min_length=8,
            description="Yelp API key",
            json_schema_extra={"format": "password", "writeOnly": True},
        ),
    ],
) -> dict[str, Any]:
    """Fetch a Yelp business page."""
    return {"scraper": "yelp", "server": NAME, "url": yelp_url, "key_length": len(api_key)}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(query: Annotated[int, Field(description="A numeric record id")]) -> dict[str, Any]:
    """Look up a record by its numeric id (its `query` is an integer, unlike search's)."""
    return {"server": NAME, "record": query}


@server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
def text_only(text: str) -> str:
    """Echo the text back as text content only, without structuredContent (as most non-Python servers do)."""
    return text


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def wipe() -> dict[str, int]:
    """A destructive tool that increments the process-wide counter, so tests can tell whether it ran."""
    _counter["value"] += 1
    return {"value": _counter["value"]}


_flaky_calls: dict[str, int] = {}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def flaky(key: str, fail_times: int = 1) -> dict[str, Any]:
    """Fail the first `fail_times` calls for `key` (counted process-wide), then succeed (for retry checks)."""
    _flaky_calls[key] = _flaky_calls.get(key, 0) + 1
    calls = _flaky_calls[key]
    if calls <= fail_times:
        raise ToolError(f"flaky {key}: failure {calls} of {fail_times}")
    return {"key": key, "calls": calls}


@server.resource("test://readme", name="readme", description="A static text resource", mime_type="text/plain")
def readme() -> str:
    return f"readme of {NAME}"


@server.resource("test://items/{item}", name="item", description="A templated resource")
def item(item: str) -> str:
    return f"item {item} of {NAME}"


@server.prompt(description="Greet someone")
def greet(name: str) -> str:
    return f"Say hello to {name}, from {NAME}."


START_GATE_SECONDS = 300.0


def wait_for_start_gate() -> None:
    """`TESTSERVER_START_GATE=PATH`: come up only once the test has created PATH, a backend slow to start
    for exactly as long as the test needs (a `TESTSERVER_START_DELAY` nap is a guess at it)."""
    gate = os.environ.get("TESTSERVER_START_GATE")
    deadline = time.monotonic() + START_GATE_SECONDS
    while gate and not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, help="serve streamable HTTP on this port")
    args = parser.parse_args()
    time.sleep(float(os.environ.get("TESTSERVER_START_DELAY", "0")))  # a backend that is slow to come up
    wait_for_start_gate()
    if args.http is None:
        server.run("stdio")
    else:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
