"""Who made a change, and from where: what every audit record says about its author.

Made once at the edge (a REST route, a UI page, a CLI command) and handed to the
repository that makes the change, which writes the audit record in the same
transaction (`toolweave.store.audit`). A plain value with no imports, so the core can
pass one through (`resume_run`) without knowing about the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from toolweave import __version__

CLI_USER_AGENT = f"toolweave-cli/{__version__}"
"""What `toolweave` commands send when they go through a running gateway, so their changes are
recorded `via: cli`. A hint for the reader of the log, not a proof: any client can send it."""

Via = Literal["rest", "ui", "cli", "mcp", "federation"]


@dataclass(frozen=True, slots=True)
class Actor:
    tenant: str | None
    """The caller's tenant (None: the operator)."""
    who: str
    """The caller's subject when it has one, else its key (`key:tw_AbCd1234`), `local`, `cli:USER`."""
    via: Via
    """The door the change came through."""
    source: str | None = None
    """The client's address (and user agent, when known); None for a local CLI command."""


def cli_actor() -> Actor:
    """A CLI command working on the database directly: the operator, named by the OS user."""
    import getpass

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = "unknown"
    return Actor(tenant=None, who=f"cli:{user}", via="cli")
