"""Approval: `approval` patterns and `approve_destructive`, asked through the session's `elicit`.

The MCP elicitation round-trip is covered by the server tests; here the
executor's path is driven by a Session whose `elicit` answers directly.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from support.executor import MakeGateway, backend
from support.results import text
from toolweave import Gateway
from toolweave.composite.base import ElicitOutcome
from toolweave.composite.errors import ElicitUnavailable
from toolweave.executor import Session


class Asker:
    """An `elicit` function that records what it was asked and answers with `outcome`."""

    def __init__(self, outcome: ElicitOutcome | BaseException) -> None:
        self.outcome = outcome
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, message: str, schema: dict[str, Any], timeout: float | None) -> ElicitOutcome:
        self.asked.append((message, schema))
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


async def _counter(gw: Gateway) -> int:
    return (await gw.call("t__counter")).structured_content["value"]


@pytest.fixture
async def approving(make_gateway: MakeGateway) -> Gateway:
    return await make_gateway(backend() + '[policy]\napproval = ["t__increment", "t__secret_echo"]\n')


async def test_approval_declined_skips_execution(
    approving: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    asker = Asker(ElicitOutcome("decline"))
    ex = approving.executor(Session(elicit=asker))
    with caplog.at_level(logging.INFO, logger="toolweave.approval"):
        result = await ex.call("t__increment", {"by": 2})
    assert result.is_error
    assert text(result) == "the user refused the call to 't__increment' (decline); it was not made"
    assert await _counter(approving) == 0
    ((message, schema),) = asker.asked
    assert message == 'toolweave wants to call t__increment with {"by":2}. Allow it?'
    assert schema["properties"]["approve"]["type"] == "boolean"
    assert "approval for t__increment: refused (decline)" in caplog.text


async def test_approval_accepted_runs_the_call(approving: Gateway, caplog: pytest.LogCaptureFixture) -> None:
    ex = approving.executor(Session(elicit=Asker(ElicitOutcome("accept", {"approve": True}))))
    with caplog.at_level(logging.INFO, logger="toolweave.approval"):
        result = await ex.call("t__increment", {"by": 2})
    assert not result.is_error and result.structured_content == {"value": 2}
    assert "approval for t__increment: granted" in caplog.text


async def test_accept_with_approve_false_is_a_refusal(approving: Gateway) -> None:
    ex = approving.executor(Session(elicit=Asker(ElicitOutcome("accept", {"approve": False}))))
    assert (await ex.call("t__increment", {})).is_error
    assert await _counter(approving) == 0


async def test_cancelled_question_is_a_refusal(approving: Gateway) -> None:
    ex = approving.executor(Session(elicit=Asker(ElicitOutcome("cancel"))))
    result = await ex.call("t__increment", {})
    assert result.is_error and "(cancel)" in text(result)


async def test_a_client_that_cannot_be_asked_gets_a_denial_saying_why(
    approving: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="toolweave.approval"):
        result = await approving.executor(Session()).call("t__increment", {})
    assert result.is_error
    assert "needs the user's approval" in text(result) and "cannot be asked" in text(result)
    assert await _counter(approving) == 0
    assert "approval for t__increment denied: the client cannot be asked" in caplog.text


async def test_elicitation_unavailable_and_timeouts_are_denials(approving: Gateway) -> None:
    unavailable = approving.executor(Session(elicit=Asker(ElicitUnavailable("no elicitation capability"))))
    result = await unavailable.call("t__increment", {})
    assert result.is_error and "no elicitation capability" in text(result)
    late = approving.executor(Session(elicit=Asker(TimeoutError())))
    result = await late.call("t__increment", {})
    assert result.is_error and "in time" in text(result)
    broken = approving.executor(Session(elicit=Asker(RuntimeError("channel closed"))))
    result = await broken.call("t__increment", {})
    assert result.is_error and "channel closed" in text(result)
    assert await _counter(approving) == 0


async def test_tools_without_approval_are_not_asked(approving: Gateway) -> None:
    asker = Asker(ElicitOutcome("decline"))
    ex = approving.executor(Session(elicit=asker))
    assert not (await ex.call("t__echo", {"text": "hi"})).is_error
    assert asker.asked == []


async def test_the_question_never_shows_secrets(approving: Gateway) -> None:
    asker = Asker(ElicitOutcome("accept", {"approve": True}))
    result = await approving.executor(Session(elicit=asker)).call("t__secret_echo", {"password": "hunter2"})
    assert not result.is_error
    ((message, _),) = asker.asked
    assert "hunter2" not in message


async def test_invalid_arguments_are_refused_before_asking(approving: Gateway) -> None:
    asker = Asker(ElicitOutcome("accept", {"approve": True}))
    result = await approving.executor(Session(elicit=asker)).call("t__increment", {"by": "lots"})
    assert result.is_error and "invalid arguments" in text(result)
    assert asker.asked == []


async def test_approve_destructive(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend() + "[policy]\napprove_destructive = true\n")
    asker = Asker(ElicitOutcome("decline"))
    ex = gw.executor(Session(elicit=asker))
    # destructiveHint (explicit, or implied by a missing annotation) needs a yes
    assert (await ex.call("t__delete_everything", {})).is_error
    # a mutating tool that says destructiveHint=false, and read-only tools, do not
    assert not (await ex.call("t__increment", {})).is_error
    assert not (await ex.call("t__echo", {"text": "x"})).is_error
    assert [m for m, _ in asker.asked] == ["toolweave wants to call t__delete_everything with {}. Allow it?"]


async def test_approval_denied_inside_a_batch_skips_only_that_call(approving: Gateway) -> None:
    ex = approving.executor(Session(elicit=Asker(ElicitOutcome("decline"))))
    results = await ex.execute_batch(
        [
            {"id": "1", "name": "t__counter"},
            {"id": "2", "name": "t__increment", "arguments": {"by": 1}},
            {"id": "3", "name": "t__slow_write", "arguments": {"label": "w"}},
            {"id": "4", "name": "t__counter"},
        ]
    )
    assert [r.is_error for r in results] == [False, True, False, False]
    assert "refused" in text(results[1])
    # only slow_write changed the counter
    assert results[3].structured_content == {"value": 1}
