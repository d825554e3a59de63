"""The `Actor` of a request: who asked for a change, and from where, for its audit record.

Made at the edge from the caller's `Session` and the HTTP request; repositories write
it into the audit log in the change's own transaction (`toolweave.store.audit`).
"""

from __future__ import annotations

from starlette.requests import HTTPConnection

from toolweave.actor import CLI_USER_AGENT, Actor, Via
from toolweave.executor import Session


def who(caller: Session) -> str:
    """The caller as the audit log names it: the subject of its token when it has one, else its key's
    label (`key:tw_AbCd1234`) or `local` (auth off)."""
    return caller.caller


def actor_for(caller: Session, request: HTTPConnection, via: Via) -> Actor:
    """`via` is the door (`rest` or `ui`); a REST request from the CLI is recorded `cli`."""
    agent = request.headers.get("user-agent", "")
    if via == "rest" and agent.startswith(CLI_USER_AGENT.split("/")[0] + "/"):
        via = "cli"
    client = request.client
    address = client.host if client is not None else None
    source = f"{address} ({agent[:200]})" if address and agent else address or (agent[:200] or None)
    return Actor(tenant=caller.tenant, who=who(caller), via=via, source=source)
