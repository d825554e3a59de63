"""The one lane of `tools/call`: which requests take the fast path, the scope check, the call.

Three entries reach it: the plain 2026-07-28 HTTP lane (`wire.transport.PlainModernLane`, no SDK
request objects at all), the SDK middleware fast path, and the SDK's own `tools/call`
handler (cursors, input responses, a call that may ask the user on 2026-07-28). All three
judge a request with the same predicate (`CallLane.fast_call`), refuse a caller without the
`tools:call` scope with the same error (`scopes.require_scope`), decide "may this call ask the
user?" with the same test (`toolweave.executor.approval.may_elicit`), and end in the same
`ToolExecutor.call` for the caller's session. The fast paths never answer an error of their
own: a request they do not take (a caller without the scope included) goes to the SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from mcp_types import LOG_LEVEL_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolweave.common_types import ProgressFn
from toolweave.composite.base import ElicitFn
from toolweave.executor import Registry, Session, ToolExecutor
from toolweave.executor.approval import may_elicit
from toolweave.executor.policy import lacks_call_scope
from toolweave.wire import sdk_compat
from toolweave.wire.params import plain_call_params


class CallLane:
    """tools/call for one gateway: eligibility, the caller's session, the executor, wire shaping."""

    __slots__ = ("_registry", "_stamp")

    def __init__(self, registry: Registry, stamp: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self._registry = registry
        self._stamp = stamp
        """Adds the 2026-07-28 `serverInfo` stamp to a result dict."""

    def may_ask(self, name: str, capabilities: types.ClientCapabilities | None) -> bool:
        """Whether a 2026-07-28 call of `name` may have to ask this client something mid-call (then it
        takes the InputBroker path, whose `InputRequiredResult` carries the question): the gateway's own
        questions (a composite's elicitation, approvals) need elicitation; a backend's sampling,
        elicitation or roots request needs the capability it asks for, which the relay checks."""
        if capabilities is None:
            return False
        elicits = capabilities.elicitation is not None
        if not elicits and capabilities.sampling is None and capabilities.roots is None:
            return False  # nothing can be asked (most plain clients): no catalog lookup on the hot path
        registry = self._registry
        entry = registry.catalog.get(name)
        if entry is None:
            return False
        if elicits and may_elicit(registry.policy, entry):
            return True
        return entry.composite is not None or bool(getattr(entry.backend, "asks_clients", False))

    def fast_call(
        self,
        params: Any,
        version: str,
        session: Session,
        *,
        capabilities: types.ClientCapabilities | None,
        can_notify: bool = True,
    ) -> tuple[str, dict[str, Any]] | None:
        """(name, arguments) when the fast path answers this call exactly as the SDK would, else None.

        `capabilities`: the client's; `can_notify`: the entry can send progress and log
        notifications (the plain HTTP lane cannot).
        """
        found = plain_call_params(params)
        if found is None or lacks_call_scope(session):
            return None
        if not can_notify:
            meta = params.get("_meta")
            if isinstance(meta, Mapping) and ("progressToken" in meta or LOG_LEVEL_META_KEY in meta):
                return None
        if (
            capabilities is not None
            and version in MODERN_PROTOCOL_VERSIONS
            and self.may_ask(found[0], capabilities)
        ):
            return None  # may need the 2026-07-28 background path (InputBroker)
        return found

    def executor(self, base: Session, elicit: ElicitFn | None, owner: Any = None) -> ToolExecutor:
        """The executor of one call: the caller's session with its way to ask the user; its pools are
        the connection's (`owner`, handshake era) or the principal's (2026-07-28)."""
        return ToolExecutor(self._registry, base.asking_with(elicit, owner))

    async def answer(
        self,
        base: Session,
        version: str,
        name: str,
        arguments: dict[str, Any],
        *,
        elicit: ElicitFn | None = None,
        owner: Any = None,
        progress: ProgressFn | None = None,
    ) -> dict[str, Any]:
        """Call, and shape the result for the wire exactly as the SDK's runner would."""
        result = await self.executor(base, elicit, owner).call(name, arguments, progress=progress)
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        if version in MODERN_PROTOCOL_VERSIONS:
            dumped["resultType"] = "complete"
            return self._stamp(dumped)
        return sdk_compat.serialize_server_result("tools/call", version, dumped)
