"""Agent adapters: run a model's tool calls through the executor as one batch.

Each adapter takes what the model produced (plain dicts or the SDKs' own
objects; the SDKs are never imported) and returns the messages to append to
the conversation:

- `toolweave.adapters.openai.run_tool_calls` — Chat Completions `tool_calls`
  → `{"role": "tool", ...}` messages;
- `toolweave.adapters.openai.run_function_calls` — Responses API
  `function_call` items → `function_call_output` items;
- `toolweave.adapters.anthropic.run_tool_uses` — Messages API `tool_use`
  blocks → one user message of `tool_result` blocks.

Every adapter accepts a `Gateway` (its default session) or a `ToolExecutor`
(`gateway.executor(Session(...))`) and an optional `cancel` event.
"""

from toolweave.adapters._common import result_text
from toolweave.adapters.anthropic import run_tool_uses
from toolweave.adapters.openai import run_function_calls, run_tool_calls

__all__ = ["result_text", "run_function_calls", "run_tool_calls", "run_tool_uses"]
