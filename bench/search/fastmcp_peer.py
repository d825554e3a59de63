"""Run inside FastMCP 4.1.0's own venv: its BM25 search transform over the same catalog.

Reads {"dumps": [...], "queries": [...], "separator": "__"} on stdin and writes, for each query,
the exposed names its `search_tools` returns (max_results=10), and the token-relevant text of its
answer for 5 results (its default), so both are measured in the caller's process.
"""

import asyncio
import json
import sys

from fastmcp.server.transforms.search import BM25SearchTransform
from fastmcp.server.transforms.search.base import serialize_tools_for_output_json
from fastmcp.tools.base import Tool


class DumpedTool(Tool):
    async def run(self, arguments):  # never called: only searched
        raise NotImplementedError


async def main() -> None:
    data = json.load(sys.stdin)
    tools = [
        DumpedTool(
            name=f"{dump['server']}{data['separator']}{raw['name']}",
            description=raw.get("description"),
            parameters=raw.get("inputSchema") or {"type": "object"},
        )
        for dump in data["dumps"]
        for raw in dump["tools"]
    ]
    ranking = BM25SearchTransform(max_results=10)
    default = BM25SearchTransform()
    rankings, answers = [], []
    for query in data["queries"]:
        rankings.append([tool.name for tool in await ranking._search(tools, query)])
        found = await default._search(tools, query)
        answers.append(json.dumps(await default._render_results(found)))
    listing = [ranking._make_search_tool(), ranking._make_call_tool()]
    listed = json.dumps(serialize_tools_for_output_json(listing))
    json.dump({"rankings": rankings, "answers": answers, "listing": listed}, sys.stdout)


asyncio.run(main())
