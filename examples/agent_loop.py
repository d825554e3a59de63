"""Drive a model's tool calls through toolweave's agent adapters — offline, no model, no network.

The "model outputs" below are hard-coded in the shapes the OpenAI and
Anthropic SDKs return (plain dicts here; the SDK objects work the same). Each
turn's tool calls run through the gateway's executor as ONE batch, and the
script prints the messages an agent loop would append to its conversation.

    python examples/agent_loop.py                 # uses examples/demo.toml
    python examples/agent_loop.py -c my.toml      # another config (tool names below are the demo's)
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from toolweave import Gateway
from toolweave.adapters.anthropic import run_tool_uses
from toolweave.adapters.openai import run_function_calls, run_tool_calls

DEFAULT_CONFIG = Path(__file__).resolve().parent / "demo.toml"

# -- what a model might have said ---------------------------------------------

# OpenAI Chat Completions: `completion.choices[0].message`. A read, a write, a
# read: the executor runs them as three runs with barriers, so the second
# search sees the new note. The last call has malformed JSON arguments: it
# becomes an error message for that call only.
CHAT_ASSISTANT_MESSAGE: dict[str, Any] = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_search",
            "type": "function",
            "function": {"name": "search_all", "arguments": '{"query": "deploy"}'},
        },
        {
            "id": "call_save",
            "type": "function",
            "function": {
                "name": "notes__add_note",
                "arguments": '{"title": "Deploy window", "body": "Deploy on Tuesdays."}',
            },
        },
        {
            "id": "call_check",
            "type": "function",
            "function": {"name": "notes__search", "arguments": '{"query": "window"}'},
        },
        {
            "id": "call_broken",
            "type": "function",
            "function": {"name": "notes__get_note", "arguments": '{"note_id": "n1"'},
        },
    ],
}

# OpenAI Responses API: `response.output`. Reasoning and message items are
# skipped; the two function calls are reads, so they run concurrently.
RESPONSES_OUTPUT: list[dict[str, Any]] = [
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_time",
        "name": "time__get_current_time",
        "arguments": '{"timezone": "UTC"}',
    },
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_scrape",
        "name": "smart_scraper",
        "arguments": '{"url": "https://www.linkedin.com/in/ada-lovelace"}',
    },
]

# Anthropic Messages API: `message.content`. The text block is ignored; the
# unknown tool comes back with is_error so the model can correct itself.
ANTHROPIC_CONTENT: list[dict[str, Any]] = [
    {"type": "text", "text": "I'll research that and file a note."},
    {"type": "tool_use", "id": "toolu_research", "name": "research_note", "input": {"topic": "gateway"}},
    {"type": "tool_use", "id": "toolu_typo", "name": "notes__serch", "input": {"query": "gateway"}},
]


def show(title: str, value: Any) -> None:
    print(f"\n=== {title}")
    print(json.dumps(value, indent=2, ensure_ascii=False))


async def main(config: Path) -> None:
    async with Gateway.from_config(config) as gw:
        # Chat Completions: append the assistant message, then one `tool` message per call.
        chat: list[dict[str, Any]] = [{"role": "user", "content": "What do we know about deploys?"}]
        chat.append(CHAT_ASSISTANT_MESSAGE)
        chat += await run_tool_calls(gw, CHAT_ASSISTANT_MESSAGE["tool_calls"])
        show("OpenAI Chat Completions: messages to append", chat[2:])

        # Responses API: feed the outputs back as the next request's input items.
        next_input = await run_function_calls(gw, RESPONSES_OUTPUT)
        show("OpenAI Responses: input items for the next request", next_input)

        # Anthropic: one user message holding every tool_result block.
        conversation: list[dict[str, Any]] = [{"role": "user", "content": "Research the gateway, please."}]
        conversation.append({"role": "assistant", "content": ANTHROPIC_CONTENT})
        conversation.append(await run_tool_uses(gw, ANTHROPIC_CONTENT))
        show("Anthropic: user message to append", conversation[-1])


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "-c", "--config", type=Path, default=DEFAULT_CONFIG, help="toolweave config (TOML/YAML)"
    )
    args = parser.parse_args()
    asyncio.run(main(args.config))


if __name__ == "__main__":
    cli()
