"""What a backend's request mid-call is answered with: the calling client's answer or error, the SDK
client's refusal where no client can answer, an error (not a hang) when the client never answers."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND

from toolweave.wire import relay
from toolweave.wire.errors import RelayError


class Client:
    def __init__(self, answer: Any = None, *, can: bool = True, hang: bool = False) -> None:
        self.answer, self.can, self.hang = answer, can, hang
        self.asked: list[tuple[str, Any]] = []

    def can_answer(self, method: str) -> bool:
        return self.can

    async def request(
        self, method: str, params: Mapping[str, Any] | None, progress: relay.ProgressFn | None = None
    ) -> dict[str, Any]:
        self.asked.append((method, params))
        if self.hang:
            await asyncio.Event().wait()
        if isinstance(self.answer, RelayError):
            raise self.answer
        return self.answer

    async def log(self, params: Mapping[str, Any]) -> None:
        pass


async def test_the_clients_answer_and_error_go_back_as_they_are() -> None:
    client = Client({"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"})
    params = {"messages": [], "maxTokens": 5}
    assert await relay.answer_server_request(client, "sampling/createMessage", params) == {
        "result": client.answer
    }
    assert client.asked == [("sampling/createMessage", params)]
    refusing = Client(RelayError(-1, "User rejected", {"why": "no"}))
    assert await relay.answer_server_request(refusing, "elicitation/create", {}) == {
        "error": {"code": -1, "message": "User rejected", "data": {"why": "no"}}
    }


async def test_without_a_client_the_sdk_clients_refusals() -> None:
    for client in (None, Client(can=False)):
        answer = await relay.answer_server_request(client, "sampling/createMessage", {})
        assert answer == {"error": {"code": INVALID_REQUEST, "message": "Sampling not supported"}}
    assert await relay.answer_server_request(None, "ping", None) == {"result": {}}
    unknown = await relay.answer_server_request(Client({}), "tasks/get", {})
    assert unknown["error"]["code"] == METHOD_NOT_FOUND


async def test_a_client_that_never_answers_is_an_error_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relay, "RELAY_TIMEOUT", 0.05)
    answer = await relay.answer_server_request(Client(hang=True), "roots/list", None)
    assert (
        answer["error"]["code"] == INTERNAL_ERROR
        and "did not answer roots/list" in answer["error"]["message"]
    )


async def test_the_calling_client_is_the_contexts() -> None:
    client = Client({})
    assert relay.calling_client() is None
    with relay.client_of_call(client):
        assert relay.calling_client() is client
        assert await asyncio.create_task(_seen()) is client  # tasks started in the call inherit it
    assert relay.calling_client() is None


async def _seen() -> Any:
    return relay.calling_client()
