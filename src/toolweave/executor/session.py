"""Who is calling: the session every stage of a call is judged for."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from toolweave.composite.base import ElicitFn

ALL_SCOPES = frozenset({"tools:read", "tools:call", "tools:admin", "tools:federate"})
CALL_SCOPE = "tools:call"


@dataclass(slots=True)
class Session:
    """One caller: an MCP connection or API key, a REST caller, the CLI, a `Gateway` user.

    Identity is `(tenant, subject, scopes)`, made once at the edge (`server/auth.py`)
    and the same however the caller got in: `subject` is who acts, for records and
    logs (the IdP's `sub` claim for an OAuth access token, the key's label
    `key:tw_xxxxxxxx` for an API key, `local` for the operator without auth). It
    decides nothing: visibility is the tenant's and powers are the scopes'.
    `label` names the credential for per-credential limits (MCP session quotas).

    Its admission pools are found by identity (see `admission.Admission`): the
    `owner` object when there is one (a handshake-era MCP connection, whose pools
    live as long as it does), else the principal `(tenant, label, scopes)`, so an
    API key gets the same pools over MCP and REST.
    """

    tenant: str | None = None
    scopes: frozenset[str] = ALL_SCOPES
    elicit: ElicitFn | None = None
    """How to ask this caller's user (None: it cannot be asked)."""
    label: str = "local"
    extra: dict[str, Any] = field(default_factory=dict)
    owner: Any = None
    """The object whose lifetime is this session's (an MCP connection), or None for a principal."""
    subject: str | None = None
    """Who acts (see the class docstring); None means the same as `label`."""

    @property
    def caller(self) -> str:
        """The subject to record as this call's caller: `subject`, else the credential's label."""
        return self.subject if self.subject is not None else self.label

    @property
    def principal(self) -> Hashable:
        return (self.tenant, self.label, self.scopes)

    def asking_with(self, elicit: ElicitFn | None, owner: Any = None) -> Session:
        """The same caller for one call, with its way to ask the user (and its connection, if any).

        Built directly rather than with `dataclasses.replace`: this runs on every MCP call.
        """
        return Session(
            self.tenant,
            self.scopes,
            elicit,
            self.label,
            self.extra,
            owner if owner is not None else self.owner,
            self.subject,
        )


@dataclass(slots=True)
class BatchCall:
    id: str
    name: str
    arguments: dict[str, Any]
