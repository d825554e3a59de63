"""A backend's requests to the client whose call caused them: sampling, elicitation, roots, and
its log messages.

The SDK client runs its callbacks in its own task, and a server may send a request on its
standalone stream, so which call caused a request is not on the wire: the calling client is the
call's context (`wire.relay.calling_client`), else the one client with a call in flight that
can answer. With several candidates nobody is asked, never another caller's client.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp import Client
from pydantic import TypeAdapter, ValidationError

from toolweave.backends.base import logger
from toolweave.backends.mcp.describe import brief
from toolweave.wire import relay

_SAMPLING_RESULT: TypeAdapter[Any] = TypeAdapter(
    types.CreateMessageResult | types.CreateMessageResultWithTools
)
_ELICIT_RESULT: TypeAdapter[Any] = TypeAdapter(types.ElicitResult)
_ROOTS_RESULT: TypeAdapter[Any] = TypeAdapter(types.ListRootsResult)


class ServerRequests:
    """The SDK client's callbacks of one backend, relayed to the client of the call in flight."""

    def __init__(self, name: str, client: Callable[[], Client | None]) -> None:
        self._name = name
        self._client = client
        """The connected SDK client, if any: where the client's progress on a request goes."""
        self.callers: list[relay.ClientChannel] = []
        """The clients of the calls in flight: where the SDK client's callbacks relay, when it is one."""
        self._log_listeners: list[Callable[[dict[str, Any]], Any]] = []

    def calling_client(self, method: str | None = None) -> relay.ClientChannel | None:
        """The client of this call: the context's (lean path, input-required driver), else the one client
        with a call in flight that can answer `method`. The SDK client runs its callbacks in its own task
        and a server may send a request on its standalone stream, so which call caused it is not on the
        wire; with several candidates, nobody is asked (never another caller's client)."""
        found = relay.calling_client()
        if found is not None:
            return found
        candidates = {id(c): c for c in self.callers if method is None or c.can_answer(method)}
        return next(iter(candidates.values())) if len(candidates) == 1 else None

    async def _relay(self, method: str, params: Any, result_type: TypeAdapter[Any]) -> Any:
        dumped = (
            params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else None
        )
        token = relay.progress_token(dumped)
        progress = functools.partial(self._send_progress, token) if token is not None else None
        answer = await relay.answer_server_request(self.calling_client(method), method, dumped, progress)
        if "error" in answer:
            return types.ErrorData.model_validate(answer["error"])
        try:
            return result_type.validate_python(answer["result"], by_name=False)
        except ValidationError as error:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"the client's answer: {brief(error)}")

    async def _send_progress(
        self, token: str | int, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """The client's progress on a relayed request, to the backend under the backend's own token."""
        client = self._client()
        if client is not None:
            await client.session.send_progress_notification(token, progress, total, message)

    async def sampling(self, context: Any, params: Any) -> Any:
        return await self._relay("sampling/createMessage", params, _SAMPLING_RESULT)

    async def elicitation(self, context: Any, params: Any) -> Any:
        return await self._relay("elicitation/create", params, _ELICIT_RESULT)

    async def roots(self, context: Any) -> Any:
        return await self._relay("roots/list", None, _ROOTS_RESULT)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        """A log message to the client of the call it belongs to; outside any call, to the log listeners
        (the MCP front: every connection that set a level). During calls of several clients it belongs
        to no one the gateway can tell, and is not passed on (never to another caller's client)."""
        dumped = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        client = self.calling_client()
        if client is not None:
            await client.log(dumped)
        elif not self.callers:
            for listener in list(self._log_listeners):
                try:
                    await listener(dumped)
                except Exception:  # noqa: BLE001 - one listener must not stop the others
                    logger.exception("log listener failed for backend %s", self._name)

    def on_log(self, listener: Callable[[dict[str, Any]], Any]) -> Callable[[], None]:
        """Await `listener(params)` for each log message the backend sends outside any call; returns the undo."""
        self._log_listeners.append(listener)
        return lambda: self._log_listeners.remove(listener) if listener in self._log_listeners else None
