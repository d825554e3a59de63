"""Try it, live, in a real browser: progress while a call runs, and a workflow's question and the
policy's approval answered in the page, after which the call goes on (through the executor)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import tw_gates
from playwright.async_api import expect

from support.browser import serve_ui
from support.configs import python_backend
from support.paths import PYTHON, RELAYSERVER

ASK_THEN_GREET = {
    "name": "ask_then_greet",
    "description": "Ask how to address someone, take a moment, then greet them.",
    "parameters": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]},
    "steps": [
        {
            "id": "ask",
            "type": "elicitation",
            "message": "How should I address {{ params.who }}?",
            "schema": {
                "type": "object",
                "properties": {"title": {"type": "string", "description": "Dr, Ms, Mx…"}},
                "required": ["title"],
            },
        },
        {"id": "pause", "tool": "gates/wait_for", "arguments": {"gate": "pause"}, "dependsOn": ["ask"]},
        {
            "id": "hello",
            "tool": "py/greet",
            "arguments": {"name": "{{ steps.ask.output.content.title }} {{ params.who }}"},
            "dependsOn": ["pause"],
        },
    ],
}
APPROVE_GREET = {"approval": ["py__greet"]}


async def test_a_question_and_an_approval_are_answered_in_the_page(browser: Any, tmp_path: Path) -> None:
    gates = python_backend("gates", module="tw_gates")  # the pause lasts until the test has seen it
    raw = {
        "backends": [python_backend(), gates],
        "composite_tools": [ASK_THEN_GREET],
        "policy": APPROVE_GREET,
    }
    with tw_gates.gate("pause"):
        async with serve_ui(raw, tmp_path) as server:
            page = await browser.new_page()
            await page.goto(f"{server.url}/tools/ask_then_greet")
            await page.fill("#arg-who", "Ada")
            await page.click("#try-form button[type=submit]")

            # the workflow's elicitation step asks; a required answer left empty is refused at its field
            await expect(page.locator("#question-message")).to_have_text("How should I address Ada?")
            await expect(page.locator("#answer-title")).to_be_focused()  # keyboard users can type at once
            await page.click("#answer")
            await expect(page.locator("#question .field-problem")).to_contain_text("required")
            await page.fill("#answer-title", "Dr")
            await page.click("#answer")

            # progress while the next step runs: the finished steps, the fraction, the time
            await expect(page.locator("#live-lines")).to_contain_text("step ask completed")
            await expect(page.locator("#live-progress")).to_have_attribute("max", "3")
            await expect(page.locator("#live-state")).to_contain_text("Running")
            tw_gates.open_gate("pause")

            # the policy wants the user's yes before py__greet runs (an inner call: through the executor)
            await expect(page.locator("#question h3")).to_have_text("Approval needed", timeout=10_000)
            await expect(page.locator("#question-message")).to_contain_text("py__greet")
            await expect(page.locator("#question-message")).to_contain_text("Dr Ada")
            await page.click("#approve")
            await expect(page.locator("#result")).to_contain_text("Hello, Dr Ada.", timeout=10_000)
            await expect(page.locator("#workflow-steps li")).to_have_count(3)

            await page.click("#run-link")
            await expect(page.locator("#run-status")).to_have_text("completed")

            # refusing an approval: the call is not made, and the result says so
            await page.goto(f"{server.url}/tools/py__greet")
            await page.fill("#arg-name", "Bob")
            await page.click("#try-form button[type=submit]")
            await expect(page.locator("#question h3")).to_have_text("Approval needed")
            await expect(page.locator("#approve")).to_be_focused()
            await page.keyboard.press("Tab")
            await page.keyboard.press("Enter")  # Refuse, by keyboard
            await expect(page.locator("#result")).to_have_class(re.compile("is-error"))
            await expect(page.locator("#result")).to_contain_text("refused")


async def test_a_running_call_can_be_cancelled_and_is_private_to_its_page(
    browser: Any, tmp_path: Path
) -> None:
    raw = {"backends": [python_backend()]}
    async with serve_ui(raw, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/tools/py__nap")
        await page.fill("#arg-seconds", "30")
        await page.click("#try-form button[type=submit]")
        await expect(page.locator("#live-state")).to_contain_text("Running")
        call_id = await page.locator("#live").get_attribute("data-call")

        other = await browser.new_context()  # another browser session cannot follow or cancel it
        stranger = await other.new_page()
        seen = await stranger.goto(f"{server.url}/calls/{call_id}")
        assert seen is not None and seen.status == 404

        await page.click("#live-cancel")
        await expect(page.locator("#result")).to_contain_text("cancelled", timeout=10_000)
        await expect(page.locator("#result")).to_have_class(re.compile("is-error"))


async def test_a_backends_own_question_reaches_the_page(browser: Any, tmp_path: Path) -> None:
    raw = {"backends": [{"name": "rs", "command": PYTHON, "args": [str(RELAYSERVER)]}]}
    async with serve_ui(raw, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/tools/rs__ask_name")
        await page.click("#try-form button[type=submit]")
        # the backend's elicitation/create, relayed to the page as to an MCP client
        await expect(page.locator("#question-message")).to_have_text("What is your name?", timeout=10_000)
        await page.fill("#answer-name", "Ada")
        await page.click("#answer")
        await expect(page.locator("#result")).to_contain_text("hello, Ada", timeout=10_000)
