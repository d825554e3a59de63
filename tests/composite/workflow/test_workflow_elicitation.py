"""Elicitation steps: accept, decline, cancel, timeout, an unavailable client, and skip_remaining."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from support.fakes import FakeCalls
from support.results import meta, texts
from support.workflows import build, catalog_for, params, statuses
from toolweave.composite.base import ElicitOutcome
from toolweave.composite.errors import ElicitUnavailable

Ask = Callable[[str, dict[str, Any], float | None], Awaitable[ElicitOutcome]]


def answering(action: str, content: dict[str, Any] | None = None, asked: list[Any] | None = None) -> Ask:
    async def elicit(message: str, schema: dict[str, Any], timeout: float | None) -> ElicitOutcome:
        if asked is not None:
            asked.append((message, schema, timeout))
        return ElicitOutcome(action, content)  # type: ignore[arg-type]

    return elicit


async def unavailable(message: str, schema: dict[str, Any], timeout: float | None) -> ElicitOutcome:
    raise ElicitUnavailable("client has no elicitation capability")


async def silent(message: str, schema: dict[str, Any], timeout: float | None) -> ElicitOutcome:
    await asyncio.sleep(10)
    raise AssertionError("unreachable")


def confirm_then_deploy(**confirm: Any) -> list[dict[str, Any]]:
    step = {
        "id": "confirm",
        "type": "elicitation",
        "message": "Deploy {{ params.service }} to prod?",
        **confirm,
    }
    return [
        step,
        {"id": "deploy", "tool": "k8s/apply", "dependsOn": ["confirm"]},
        {"id": "notify", "tool": "slack/send", "dependsOn": ["deploy"]},
    ]


CATALOG = catalog_for("k8s/apply", "slack/send")
PARAMS = params("service")


async def test_accept_passes_the_answer_on() -> None:
    asked: list[Any] = []
    schema = {"type": "object", "properties": {"replicas": {"type": "integer"}}, "required": ["replicas"]}
    steps = [
        {
            "id": "ask",
            "type": "elicitation",
            "message": "How many for {{ params.service }}?",
            "schema": schema,
            "timeout": "2m",
        },
        {
            "id": "scale",
            "tool": "k8s/apply",
            "dependsOn": ["ask"],
            "arguments": {
                "n": "{{ steps.ask.output.content.replicas }}",
                "a": "{{ steps.ask.output.action }}",
            },
        },
    ]
    backend = FakeCalls()
    workflow = build(steps, CATALOG, parameters=PARAMS)
    result = await workflow.run(
        {"service": "api"}, backend.context(elicit=answering("accept", {"replicas": 4}, asked))
    )
    assert not result.is_error
    assert asked == [("How many for api?", schema, 120.0)]
    assert backend.calls == [("k8s__apply", {"n": 4, "a": "accept"})]


async def test_a_single_value_schema_is_wrapped_for_mcp_and_unwrapped_after() -> None:
    asked: list[Any] = []
    steps = [
        {"id": "ok", "type": "elicitation", "message": "Proceed?", "schema": {"type": "boolean"}},
        {"id": "go", "tool": "k8s/apply", "dependsOn": ["ok"], "condition": "{{ steps.ok.output.content }}"},
    ]
    backend = FakeCalls()
    workflow = build(steps, CATALOG)
    await workflow.run({}, backend.context(elicit=answering("accept", {"value": True}, asked)))
    assert asked[0][1] == {
        "type": "object",
        "properties": {"value": {"type": "boolean"}},
        "required": ["value"],
    }
    assert backend.called() == ["k8s__apply"]


async def test_an_answer_that_breaks_the_schema_fails_the_step() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    workflow = build([{"id": "ask", "type": "elicitation", "message": "n?", "schema": schema}], CATALOG)
    result = await workflow.run({}, FakeCalls().context(elicit=answering("accept", {"n": "lots"})))
    assert result.is_error and "does not match the requested schema" in texts(result)[0]


async def test_decline_aborts_by_default() -> None:
    backend = FakeCalls()
    workflow = build(confirm_then_deploy(), CATALOG, parameters=PARAMS)
    result = await workflow.run({"service": "api"}, backend.context(elicit=answering("decline")))
    assert result.is_error and backend.calls == []
    assert statuses(result) == {"confirm": "failed", "deploy": "cancelled", "notify": "cancelled"}
    assert "declined" in texts(result)[0]


async def test_decline_with_continue_goes_on() -> None:
    backend = FakeCalls()
    workflow = build(confirm_then_deploy(onDecline="continue"), CATALOG, parameters=PARAMS)
    result = await workflow.run({"service": "api"}, backend.context(elicit=answering("decline")))
    assert not result.is_error and backend.called() == ["k8s__apply", "slack__send"]


async def test_skip_remaining_really_skips_the_remaining_steps() -> None:
    backend = FakeCalls()
    workflow = build(
        [
            *confirm_then_deploy(onDecline={"action": "skip_remaining"}),
            {
                "id": "independent",
                "tool": "slack/send",
                "dependsOn": ["confirm"],
                "defaultResults": {"sent": False},
            },
        ],
        CATALOG,
        parameters=PARAMS,
    )
    result = await workflow.run({"service": "api"}, backend.context(elicit=answering("decline")))
    assert backend.calls == []
    assert not result.is_error and meta(result)["status"] == "completed"
    assert statuses(result) == {
        "confirm": "completed",
        "deploy": "skipped",
        "notify": "skipped",
        "independent": "skipped",
    }
    assert result.structured_content == {"sent": False}
    assert "skipped the remaining steps: deploy, notify, independent" in texts(result)[0]


async def test_skip_remaining_lets_running_steps_finish() -> None:
    backend = FakeCalls(delays={"slack__send": 0.02})
    steps = [
        {"id": "ping", "tool": "slack/send"},
        {"id": "confirm", "type": "elicitation", "message": "go?", "onCancel": "skip_remaining"},
        {"id": "deploy", "tool": "k8s/apply", "dependsOn": ["confirm"]},
    ]
    result = await build(steps, CATALOG).run({}, backend.context(elicit=answering("cancel")))
    assert statuses(result) == {"ping": "completed", "confirm": "completed", "deploy": "skipped"}
    assert ("end", "slack__send") in backend.events and "k8s__apply" not in backend.called()


async def test_cancel_uses_on_cancel() -> None:
    backend = FakeCalls()
    workflow = build(confirm_then_deploy(onCancel="continue"), CATALOG, parameters=PARAMS)
    result = await workflow.run({"service": "api"}, backend.context(elicit=answering("cancel")))
    assert not result.is_error and backend.called() == ["k8s__apply", "slack__send"]
    failing = build(confirm_then_deploy(), CATALOG, parameters=PARAMS)
    result = await failing.run({"service": "api"}, FakeCalls().context(elicit=answering("cancel")))
    assert result.is_error and "cancelled" in texts(result)[0]


async def test_a_timeout_counts_as_cancel() -> None:
    workflow = build(
        confirm_then_deploy(timeout="20ms", onCancel="skip_remaining"), CATALOG, parameters=PARAMS
    )
    backend = FakeCalls()
    result = await workflow.run({"service": "api"}, backend.context(elicit=silent))
    assert not result.is_error and backend.calls == []
    assert statuses(result)["deploy"] == "skipped"
    aborting = build(confirm_then_deploy(timeout="20ms"), CATALOG, parameters=PARAMS)
    result = await aborting.run({"service": "api"}, FakeCalls().context(elicit=silent))
    assert result.is_error and "no answer within 20ms" in texts(result)[0]


async def test_a_timeout_takes_the_default_response_when_there_is_one() -> None:
    steps = [
        {
            "id": "ok",
            "type": "elicitation",
            "message": "Proceed?",
            "schema": {"type": "boolean"},
            "timeout": "20ms",
            "defaultResponse": False,
        },
        {"id": "go", "tool": "k8s/apply", "dependsOn": ["ok"], "condition": "{{ steps.ok.output.content }}"},
    ]
    backend = FakeCalls()
    result = await build(steps, CATALOG).run({}, backend.context(elicit=silent))
    assert backend.calls == [] and statuses(result) == {"ok": "completed", "go": "skipped"}


@pytest.mark.parametrize("elicit", [None, unavailable])
async def test_a_client_that_cannot_answer_gets_a_clear_error(elicit: Ask | None) -> None:
    workflow = build(confirm_then_deploy(), CATALOG, parameters=PARAMS)
    result = await workflow.run({"service": "api"}, FakeCalls().context(elicit=elicit))
    assert result.is_error
    assert "cannot answer elicitation requests" in texts(result)[0] and "defaultResponse" in texts(result)[0]


async def test_a_client_that_cannot_answer_gets_the_default_response() -> None:
    steps = [
        {
            "id": "ask",
            "type": "elicitation",
            "message": "Env?",
            "schema": {"type": "string"},
            "defaultResponse": "staging",
        },
        {
            "id": "deploy",
            "tool": "k8s/apply",
            "dependsOn": ["ask"],
            "arguments": {"env": "{{ steps.ask.output.content }}"},
        },
    ]
    backend = FakeCalls()
    result = await build(steps, CATALOG).run({}, backend.context(elicit=unavailable))
    assert not result.is_error and backend.calls == [("k8s__apply", {"env": "staging"})]


async def test_an_elicitation_only_step_can_be_the_type_less_short_form() -> None:
    backend = FakeCalls()
    steps = [{"id": "ask", "message": "Sure?", "onDecline": "continue"}]
    result = await build(steps, CATALOG).run({}, backend.context(elicit=answering("decline")))
    assert result.structured_content == {"action": "decline"}


async def test_a_broken_elicitation_channel_fails_the_step_not_the_gateway() -> None:
    async def broken(message: str, schema: dict[str, Any], timeout: float | None) -> ElicitOutcome:
        raise ConnectionError("client went away")

    result = await build(confirm_then_deploy(), CATALOG, parameters=PARAMS).run(
        {"service": "api"}, FakeCalls().context(elicit=broken)
    )
    assert result.is_error and "asking the user failed: ConnectionError: client went away" in texts(result)[0]
