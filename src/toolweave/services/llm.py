"""Descriptions: the deterministic mini-prompt, optionally rewritten by an OpenAI-compatible LLM.

The deterministic text comes from the composite builders themselves
(`toolweave.export.describe`), so "regenerate" means: take the definition's
opening sentence(s), drop the generated sections, and build again against
the current catalog — the operations' current descriptions and schemas.

When `TOOLWEAVE_LLM_BASE_URL` and `TOOLWEAVE_LLM_MODEL` are set (and
`TOOLWEAVE_LLM_API_KEY` when the endpoint needs one), that text and the
input schema go to `{base}/chat/completions`, and the answer is used. Any
failure of the endpoint falls back to the deterministic text with a
warning: a flaky LLM must never block editing a tool.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx  # the HTTP client the MCP SDK already brings; no extra dependency
import orjson

from toolweave.bounded import read_bounded
from toolweave.export.describe import FULL_DESCRIPTION_CHARS, summary_of
from toolweave.services.errors import AnswerTooLarge

logger = logging.getLogger("toolweave.llm")

BASE_URL_ENV = "TOOLWEAVE_LLM_BASE_URL"
MODEL_ENV = "TOOLWEAVE_LLM_MODEL"
API_KEY_ENV = "TOOLWEAVE_LLM_API_KEY"
TIMEOUT_SECONDS = 60.0
MAX_ANSWER_BYTES = 1 << 20
"""Largest answer read from the endpoint (a description is a few kB); past it the generated one is kept."""


SYSTEM_PROMPT = """You write tool descriptions that AI agents read to decide whether and how to call a tool.
Rewrite the draft you are given into a clear mini-prompt in exactly this format:

Use this tool to {what the tool does}.

# Required inputs (always include these):
- {param}: {description with type, constraints, what to include}

# Optional inputs (include based on {condition}):
- {param}: {description with when to use}

# What the tool outputs:
{description of the output format, key fields, and how to use the result}

Keep every parameter of the draft, with its exact name. Invent nothing the draft does not say.
Answer with the description only: no preamble, no code fences."""


@dataclass(frozen=True, slots=True)
class Rewritten:
    text: str
    source: str
    """`llm` or `generated`."""
    warning: str | None = None


def opening_of(description: str) -> str:
    """The definition's own opening, without generated sections, short enough to be regenerated around."""
    lines: list[str] = []
    for line in description.strip().splitlines():
        if line.lstrip().startswith("#"):
            break
        lines.append(line)
    text = "\n".join(lines).strip()
    if len(text) >= FULL_DESCRIPTION_CHARS:
        text = summary_of(text)
    return text


def llm_configured() -> bool:
    return bool(os.environ.get(BASE_URL_ENV) and os.environ.get(MODEL_ENV))


async def rewrite(draft: str, name: str, input_schema: dict[str, Any] | None) -> Rewritten:
    """The LLM's version of `draft`, or `draft` itself (with a warning) when the endpoint fails."""
    base = os.environ.get(BASE_URL_ENV, "").rstrip("/")
    model = os.environ.get(MODEL_ENV, "")
    headers = {"Content-Type": "application/json"}
    api_key = os.environ.get(API_KEY_ENV)
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    user = (
        f"Tool name: {name}\n\nInput schema (JSON):\n{json.dumps(input_schema or {}, indent=2)}\n\n"
        f"Draft description:\n{draft}"
    )
    payload = {
        "model": model,
        "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
        "temperature": 0,
    }
    try:
        async with (
            httpx.AsyncClient(timeout=TIMEOUT_SECONDS) as client,
            client.stream("POST", f"{base}/chat/completions", json=payload, headers=headers) as response,
        ):
            response.raise_for_status()
            body = await read_bounded(response, MAX_ANSWER_BYTES)
        if body is None:
            raise AnswerTooLarge(f"an answer larger than {MAX_ANSWER_BYTES} bytes")
        answer = orjson.loads(body)["choices"][0]["message"]["content"]
        if not isinstance(answer, str) or not answer.strip():
            raise ValueError("the answer has no text")
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as error:
        reason = _reason(error)
        logger.warning("the LLM endpoint failed (%s); keeping the generated description", reason)
        return Rewritten(
            draft, "generated", f"the LLM endpoint failed ({reason}); the generated description was used"
        )
    return Rewritten(_unfenced(answer.strip()), "llm")


def _reason(error: Exception) -> str:
    """Status or error type only: the endpoint's body or URL could carry anything, including a key."""
    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code}"
    if isinstance(error, AnswerTooLarge):
        return str(error)
    return type(error).__name__


def _unfenced(text: str) -> str:
    if text.startswith("```") and text.endswith("```"):
        inner = text[3:-3]
        return inner.split("\n", 1)[1].strip() if "\n" in inner else inner.strip()
    return text
