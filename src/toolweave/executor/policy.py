"""Who may call what: the `tools:call` scope, then allow/deny patterns, globally and per tenant or
API key scope. The first stage of every call, inner calls of composites included."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from toolweave.config.models import PolicyConfig
from toolweave.config.patterns import PatternSet
from toolweave.executor.session import CALL_SCOPE, Session


@dataclass(frozen=True, slots=True)
class _Rule:
    tenant: str | None
    scope: str | None
    allow: PatternSet
    deny: PatternSet


class Policy:
    """Evaluated for every call, including each inner call of a composite.

    Deny wins over allow. A non-empty allow list (global or of a matching
    rule) means only matching tools are allowed.
    """

    def __init__(self, config: PolicyConfig) -> None:
        self._allow = PatternSet(config.allow)
        self._deny = PatternSet(config.deny)
        self._rules = [
            _Rule(rule.tenant, rule.scope, PatternSet(rule.allow), PatternSet(rule.deny))
            for rule in config.rules
        ]
        self.approval = PatternSet(config.approval)
        self.approve_destructive = config.approve_destructive
        self.is_open = not (self._allow or self._deny or self._rules)

    def call_denial(self, name: str, session: Session) -> str | None:
        """Why `session` may not call `name` (its scopes, then the patterns), or None when it may."""
        if CALL_SCOPE not in session.scopes:
            return f"calling {name!r} needs the {CALL_SCOPE} scope"
        if self.is_open:
            return None
        return self.denial(name, session.tenant, session.scopes)

    def denial(self, name: str, tenant: str | None = None, scopes: Collection[str] = ()) -> str | None:
        """Why `name` may not be called, or None when it may."""
        if self.is_open:
            return None
        if self._deny.matches(name):
            return f"tool {name!r} is denied by the gateway policy"
        if self._allow and not self._allow.matches(name):
            return f"tool {name!r} is not in the gateway policy's allow list"
        for rule in self._rules:
            if rule.tenant is not None and rule.tenant != tenant:
                continue
            if rule.scope is not None and rule.scope not in scopes:
                continue
            who = (
                f"tenant {tenant!r}"
                if rule.tenant
                else f"scope {rule.scope!r}"
                if rule.scope
                else "this caller"
            )
            if rule.deny.matches(name):
                return f"tool {name!r} is denied for {who} by the gateway policy"
            if rule.allow and not rule.allow.matches(name):
                return f"tool {name!r} is not allowed for {who} by the gateway policy"
        return None


def lacks_call_scope(session: Session) -> bool:
    """The scope check of a front that must refuse before it calls at all (an MCP protocol error)."""
    return CALL_SCOPE not in session.scopes
