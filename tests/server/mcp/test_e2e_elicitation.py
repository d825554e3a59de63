"""Asking the user end to end: workflow elicitation steps and destructive-tool approval through the MCP
front, to a real `mcp.Client`, over streamable HTTP and over stdio, on both protocol revisions.

- 2025-11-25 (`mode="legacy"`): the gateway sends `elicitation/create` while the call runs.
- 2026-07-28 (`mode="auto"`): the call returns an `InputRequiredResult`; the SDK client answers
  through its `elicitation_callback` and retries with `inputResponses` + `requestState`, while the
  workflow keeps running in the gateway.

A client without `elicitation_callback` declares no elicitation capability: the workflow takes the
step's `defaultResponse` or fails the step saying why, and an approval is a denial saying why.
Whether a destructive tool ran is proven by the backend's own counter.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters

from support.paths import PYTHON, TESTSERVER, TOOLWEAVE
from support.processes import subprocess_env
from support.results import text
from support.serving import serve_mcp
from toolweave import Gateway

pytestmark = pytest.mark.asyncio(loop_scope="module")

MODES = [pytest.param("auto", id="2026-07-28"), pytest.param("legacy", id="2025-11-25")]

CONFIG = f"""
[gateway]
record_direct_calls = true

[policy]
approve_destructive = true

[[backends]]
name = "ts"
command = {PYTHON!r}
args = [{str(TESTSERVER)!r}]

# The answer flows into the next step; decline and cancel abort (the default); silence is a cancel.
[[composite_tools]]
name = "ask_add"
description = "Ask what to add, then add it"
parameters = {{ type = "object", properties = {{ a = {{ type = "integer" }} }}, required = ["a"] }}

[[composite_tools.steps]]
id = "ask"
message = "Add {{{{ params.a }}}} to what?"
schema = {{ type = "object", properties = {{ b = {{ type = "integer", title = "Number" }} }}, required = ["b"] }}
timeout = "60s"

[[composite_tools.steps]]
id = "add"
tool = "ts/add"
dependsOn = ["ask"]
arguments = {{ a = "{{{{ params.a }}}}", b = "{{{{ steps.ask.output.content.b }}}}" }}

# The same with 300 ms to answer, for the tests of silence (a loaded machine may take longer than
# 300 ms to carry an immediate answer, so the questions that are answered get a minute).
[[composite_tools]]
name = "ask_add_briefly"
description = "Ask what to add, briefly"
parameters = {{ type = "object", properties = {{ a = {{ type = "integer" }} }}, required = ["a"] }}

[[composite_tools.steps]]
id = "ask"
message = "Add {{{{ params.a }}}} to what?"
schema = {{ type = "object", properties = {{ b = {{ type = "integer", title = "Number" }} }}, required = ["b"] }}
timeout = "300ms"

[[composite_tools.steps]]
id = "add"
tool = "ts/add"
dependsOn = ["ask"]
arguments = {{ a = "{{{{ params.a }}}}", b = "{{{{ steps.ask.output.content.b }}}}" }}

# A single-value question with a default: used when the client cannot be asked or does not answer.
[[composite_tools]]
name = "ask_env"
description = "Ask for an environment, staging unless told otherwise"

[[composite_tools.steps]]
id = "ask"
type = "elicitation"
message = "Which environment?"
schema = {{ type = "string", enum = ["staging", "prod"] }}
defaultResponse = "staging"
timeout = "60s"

[[composite_tools.steps]]
id = "say"
tool = "ts/echo"
dependsOn = ["ask"]
arguments = {{ text = "env={{{{ steps.ask.output.content }}}} ({{{{ steps.ask.output.defaulted | default('answered') }}}})" }}

[[composite_tools]]
name = "ask_env_briefly"
description = "Ask for an environment, briefly"

[[composite_tools.steps]]
id = "ask"
type = "elicitation"
message = "Which environment?"
schema = {{ type = "string", enum = ["staging", "prod"] }}
defaultResponse = "staging"
timeout = "300ms"

[[composite_tools.steps]]
id = "say"
tool = "ts/echo"
dependsOn = ["ask"]
arguments = {{ text = "env={{{{ steps.ask.output.content }}}} ({{{{ steps.ask.output.defaulted | default('answered') }}}})" }}

# decline → skip_remaining: nothing after the question runs; cancel → continue: the rest runs.
[[composite_tools]]
name = "guarded_bump"
description = "Confirm, then bump the counter"

[[composite_tools.steps]]
id = "ping"
tool = "ts/echo"
arguments = {{ text = "ping" }}

[[composite_tools.steps]]
id = "confirm"
message = "Bump the counter?"
schema = {{ type = "boolean" }}
dependsOn = ["ping"]
onDecline = "skip_remaining"
onCancel = "continue"

[[composite_tools.steps]]
id = "bump"
tool = "ts/increment"
dependsOn = ["confirm"]

[[composite_tools.steps]]
id = "report"
tool = "ts/echo"
dependsOn = ["bump"]
arguments = {{ text = "confirm={{{{ steps.confirm.output.action }}}} value={{{{ steps.bump.output.value }}}}" }}
defaultResults = {{ result = "not bumped" }}

# Two questions at once, next to a tool step that finishes while the user is still answering.
[[composite_tools]]
name = "two_questions"
description = "Ask two things at once"

[[composite_tools.steps]]
id = "name"
message = "Name?"
schema = {{ type = "string" }}

[[composite_tools.steps]]
id = "age"
message = "Age?"
schema = {{ type = "integer" }}

[[composite_tools.steps]]
id = "nap"
tool = "ts/sleep"
arguments = {{ seconds = 0.05, label = "nap" }}

[[composite_tools.steps]]
id = "say"
tool = "ts/echo"
dependsOn = ["name", "age", "nap"]
arguments = {{ text = "{{{{ steps.name.output.content }}}} is {{{{ steps.age.output.content + 1 }}}} next year" }}

# A destructive tool inside a workflow: the inner call needs the user's yes too.
[[composite_tools]]
name = "wipe_flow"
description = "Wipe, from inside a workflow"

[[composite_tools.steps]]
id = "wipe"
tool = "ts/wipe"
"""


class User:
    """The person behind the client: answers each question from a script, remembers what was asked.

    Each answer is `(action, content)` or `(action, content, delay_seconds)`.
    """

    def __init__(self, *answers: tuple[Any, ...]) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append((params.message, dict(params.requested_schema)))
        action, content, *delay = self.answers.pop(0)
        if delay:
            await asyncio.sleep(delay[0])
        return types.ElicitResult(action=action, content=content)


class Progress:
    def __init__(self) -> None:
        self.seen: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, value: float, total: float | None, message: str | None) -> None:
        self.seen.append((value, total, message))

    @property
    def messages(self) -> list[str | None]:
        return [message for _, _, message in self.seen]


def steps(result: types.CallToolResult) -> dict[str, str]:
    return {step["id"]: step["status"] for step in (result.meta or {})["toolweave"]["steps"]}


async def counter(client: Client) -> int:
    return (await client.call_tool("ts__counter", {})).structured_content["value"]


# -- fixtures: one gateway under uvicorn for every HTTP test; a config file for stdio -----------------


@pytest.fixture(scope="module")
def config_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("elicitation-e2e") / "toolweave.toml"
    path.write_text(CONFIG)
    return path


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def url(config_path: Path) -> AsyncIterator[str]:
    async with Gateway.from_config(config_path) as gateway:
        assert gateway.catalog.issues == [], gateway.catalog.issues
        async with serve_mcp(gateway) as url:
            yield url


def stdio(config_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(TOOLWEAVE), args=["serve", "--stdio", "-c", str(config_path)], env=subprocess_env()
    )


# -- HTTP: a workflow asks the user ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_accept_the_answer_flows_into_later_steps(url: str, mode: str) -> None:
    user, progress = User(("accept", {"b": 5})), Progress()
    async with Client(url, mode=mode, elicitation_callback=user) as client:
        result = await client.call_tool("ask_add", {"a": 2}, progress_callback=progress)
    assert not result.is_error, text(result)
    assert result.structured_content == {"sum": 7}
    assert steps(result) == {"ask": "completed", "add": "completed"}
    assert user.asked == [
        (
            "Add 2 to what?",
            {
                "type": "object",
                "properties": {"b": {"type": "integer", "title": "Number"}},
                "required": ["b"],
            },
        )
    ]
    # one notification per finished step, the question's included, on both revisions
    assert progress.seen == [(1.0, 2.0, "step ask completed"), (2.0, 2.0, "step add completed")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("action", "why"), [("decline", "the user declined"), ("cancel", "the user cancelled")]
)
async def test_decline_and_cancel_stop_the_workflow_by_default(
    url: str, mode: str, action: str, why: str
) -> None:
    async with Client(url, mode=mode, elicitation_callback=User((action, None))) as client:
        result = await client.call_tool("ask_add", {"a": 2})
    assert result.is_error
    assert steps(result) == {"ask": "failed", "add": "cancelled"}
    assert text(result) == (
        "Workflow 'ask_add' failed.\n"
        f"Step 'ask' failed: {why}; the workflow stops here (onDecline/onCancel: abort)\n"
        "Cancelled when the workflow stopped: add."
    )


@pytest.mark.parametrize("mode", MODES)
async def test_an_answer_outside_the_schema_fails_the_step(url: str, mode: str) -> None:
    async with Client(url, mode=mode, elicitation_callback=User(("accept", {"b": "lots"}))) as client:
        result = await client.call_tool("ask_add", {"a": 2})
    assert result.is_error
    assert "Step 'ask' failed: the answer does not match the requested schema (b: type check)" in text(result)


@pytest.mark.parametrize("mode", MODES)
async def test_no_answer_in_time(url: str, mode: str) -> None:
    """The user answers after the step's 300 ms: without a default that is a cancel, with one the default."""
    late = User(("accept", {"b": 5}, 0.6))
    async with Client(url, mode=mode, elicitation_callback=late) as client:
        result = await client.call_tool("ask_add_briefly", {"a": 2})
    assert result.is_error
    assert "Step 'ask' failed: no answer within 300ms; the workflow stops here" in text(result)
    assert steps(result) == {"ask": "failed", "add": "cancelled"}
    late = User(("accept", {"value": "prod"}, 0.6))
    async with Client(url, mode=mode, elicitation_callback=late) as client:
        result = await client.call_tool("ask_env_briefly", {})
    assert not result.is_error, text(result)
    assert text(result) == "env=staging (timeout)"


@pytest.mark.parametrize("mode", MODES)
async def test_a_single_value_question_is_wrapped_and_unwrapped(url: str, mode: str) -> None:
    user = User(("accept", {"value": "prod"}))
    async with Client(url, mode=mode, elicitation_callback=user) as client:
        result = await client.call_tool("ask_env", {})
    assert text(result) == "env=prod (answered)"
    ((_message, schema),) = user.asked
    assert schema["properties"]["value"] == {"type": "string", "enum": ["staging", "prod"]}


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_without_elicitation(url: str, mode: str) -> None:
    async with Client(url, mode=mode) as client:
        defaulted = await client.call_tool("ask_env", {})
        assert not defaulted.is_error and text(defaulted) == "env=staging (unavailable)"
        failed = await client.call_tool("ask_add", {"a": 2})
    assert failed.is_error
    message = text(failed)
    assert "Step 'ask' failed: this step asks the user a question, but the client cannot answer " in message
    assert "give the step a defaultResponse" in message
    assert steps(failed) == {"ask": "failed", "add": "cancelled"}


@pytest.mark.parametrize("mode", MODES)
async def test_skip_remaining_and_continue(url: str, mode: str) -> None:
    user, progress = User(("decline", None), ("cancel", None)), Progress()
    async with Client(url, mode=mode, elicitation_callback=user) as client:
        before = await counter(client)
        skipped = await client.call_tool("guarded_bump", {}, progress_callback=progress)
        assert await counter(client) == before
        continued = await client.call_tool("guarded_bump", {})
        assert await counter(client) == before + 1
    assert not skipped.is_error, text(skipped)
    assert steps(skipped) == {
        "ping": "completed",
        "confirm": "completed",
        "bump": "skipped",
        "report": "skipped",
    }
    assert text(skipped) == (
        "Stopped at step 'confirm' (answer: decline, handled with skip_remaining); "
        'skipped the remaining steps: bump, report.\n{"result":"not bumped"}'
    )
    assert progress.messages == [
        "step ping completed",
        "step confirm completed",
        "step bump skipped",
        "step report skipped",
    ]
    assert not continued.is_error and text(continued) == f"confirm=cancel value={before + 1}"


@pytest.mark.parametrize("mode", MODES)
async def test_two_questions_at_once_and_progress_while_the_user_answers(url: str, mode: str) -> None:
    answers = {"Name?": {"value": "Ada"}, "Age?": {"value": 36}}
    asked: list[str] = []

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        await asyncio.sleep(0.2)  # the nap step finishes meanwhile
        return types.ElicitResult(action="accept", content=answers[params.message])

    progress = Progress()
    async with Client(url, mode=mode, elicitation_callback=user) as client:
        result = await client.call_tool("two_questions", {}, progress_callback=progress)
    assert not result.is_error, text(result)
    assert text(result) == "Ada is 37 next year"
    assert sorted(asked) == ["Age?", "Name?"]
    assert [value for value, _, _ in progress.seen] == [1.0, 2.0, 3.0, 4.0]
    assert progress.messages[0] == "step nap completed"  # sent while no request was waiting (2026-07-28)
    assert sorted(progress.messages[1:3]) == ["step age completed", "step name completed"]
    assert progress.messages[3] == "step say completed"


# -- HTTP: approval of destructive tools ------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_approval_accept_calls_the_tool(url: str, mode: str) -> None:
    user = User(("accept", {"approve": True}))
    async with Client(url, mode=mode, elicitation_callback=user) as client:
        before = await counter(client)
        result = await client.call_tool("ts__wipe", {})
        assert not result.is_error and result.structured_content == {"value": before + 1}
    assert user.asked[0][0] == "toolweave wants to call ts__wipe with {}. Allow it?"
    assert user.asked[0][1]["properties"]["approve"]["type"] == "boolean"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("answer", "how"),
    [
        (("decline", None), "decline"),
        (("cancel", None), "cancel"),
        (("accept", {"approve": False}), "answered no"),
    ],
)
async def test_approval_refused_does_not_call_the_tool(
    url: str, mode: str, answer: tuple[Any, ...], how: str
) -> None:
    async with Client(url, mode=mode, elicitation_callback=User(answer)) as client:
        before = await counter(client)
        result = await client.call_tool("ts__wipe", {})
        assert await counter(client) == before
    assert result.is_error
    assert text(result) == f"the user refused the call to 'ts__wipe' ({how}); it was not made"


@pytest.mark.parametrize("mode", MODES)
async def test_approval_without_elicitation_is_a_denial_saying_why(url: str, mode: str) -> None:
    async with Client(url, mode=mode) as client:
        before = await counter(client)
        result = await client.call_tool("ts__wipe", {})
        inner = await client.call_tool("wipe_flow", {})
        assert await counter(client) == before
    assert result.is_error
    assert text(result).startswith("calling 'ts__wipe' needs the user's approval, but ")
    assert "cannot be asked" in text(result) and text(result).endswith("the call was not made")
    assert inner.is_error
    assert "Step 'wipe' failed: calling 'ts__wipe' needs the user's approval" in text(inner)


@pytest.mark.parametrize("mode", MODES)
async def test_approval_of_a_workflows_inner_call(url: str, mode: str) -> None:
    user = User(("decline", None), ("accept", {"approve": True}))
    async with Client(url, mode=mode, elicitation_callback=user) as client:
        before = await counter(client)
        refused = await client.call_tool("wipe_flow", {})
        assert await counter(client) == before
        approved = await client.call_tool("wipe_flow", {})
    assert refused.is_error
    assert "Step 'wipe' failed: the user refused the call to 'ts__wipe' (decline)" in text(refused)
    assert not approved.is_error and approved.structured_content == {"value": before + 1}
    question = "toolweave wants to call ts__wipe with {}. Allow it?"
    assert [message for message, _ in user.asked] == [question, question]


# -- stdio: `toolweave serve --stdio` ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_stdio_asks_the_user(config_path: Path, mode: str) -> None:
    user = User(
        ("accept", {"b": 40}),  # ask_add
        ("decline", None),  # guarded_bump: skip_remaining
        ("decline", None),  # ts__wipe approval
        ("accept", {"approve": True}),  # ts__wipe approval
        ("accept", {"b": 1}, 0.6),  # ask_add_briefly, too late
    )
    progress = Progress()
    async with Client(stdio(config_path), mode=mode, elicitation_callback=user) as client:
        added = await client.call_tool("ask_add", {"a": 2}, progress_callback=progress)
        assert added.structured_content == {"sum": 42}
        assert progress.messages == ["step ask completed", "step add completed"]
        before = await counter(client)
        skipped = await client.call_tool("guarded_bump", {})
        assert steps(skipped)["bump"] == "skipped" and await counter(client) == before
        refused = await client.call_tool("ts__wipe", {})
        assert refused.is_error and "(decline); it was not made" in text(refused)
        assert await counter(client) == before
        approved = await client.call_tool("ts__wipe", {})
        assert approved.structured_content == {"value": before + 1}
        late = await client.call_tool("ask_add_briefly", {"a": 2})
        assert late.is_error and "no answer within 300ms" in text(late)
    assert user.answers == []


@pytest.mark.parametrize("mode", MODES)
async def test_stdio_client_without_elicitation(config_path: Path, mode: str) -> None:
    async with Client(stdio(config_path), mode=mode) as client:
        defaulted = await client.call_tool("ask_env", {})
        assert text(defaulted) == "env=staging (unavailable)"
        failed = await client.call_tool("ask_add", {"a": 2})
        assert failed.is_error and "the client cannot answer elicitation requests" in text(failed)
        before = await counter(client)
        denied = await client.call_tool("ts__wipe", {})
        assert denied.is_error and "needs the user's approval" in text(denied)
        assert await counter(client) == before
