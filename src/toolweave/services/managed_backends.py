"""Backends added and changed while serving (the web UI's "Add a backend"): checked exactly as the
config file's `[[backends]]` entries are (`parse_config` on the entry alone, `${VAR}` expanded, the
same models and messages), stored encrypted (`store.managed_backends`), audited, and started at once
and at every start of a gateway on the database.

Operator-only: a backend is shared by every tenant, and a stdio one runs a command on the gateway's
host, so only the operator (no tenant: auth off on loopback) may add or change one. A name the
config file (or a federated namespace) uses is refused: those are changed where they are defined.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolweave.actor import Actor
from toolweave.config import parse_config
from toolweave.config.models import BackendConfig
from toolweave.gateway import Gateway
from toolweave.problems import Problem
from toolweave.store.managed_backends import ManagedBackendRepository

logger = logging.getLogger(__name__)
ENTRY_PATH = "backends[0]"


@dataclass(slots=True)
class Checked:
    """An entry as the config file's validation sees it: its backend, or every problem."""

    config: BackendConfig | None
    problems: list[Problem] = field(default_factory=list)


def check_entry(entry: dict[str, Any], gateway: Gateway, *, taken: set[str]) -> Checked:
    """Validate `entry` as a `[[backends]]` entry of the config file; `taken`: names it may not use."""
    issues: list[Problem] = []
    raw = {"gateway": {"separator": gateway.config.gateway.separator}, "backends": [entry]}
    parsed = parse_config(raw, base_dir=gateway.base_dir, source=None, issues=issues)
    name = entry.get("name")
    if isinstance(name, str) and name in taken:
        issues.append(
            Problem(
                f"{ENTRY_PATH}.name",
                f"a backend named {name!r} exists already (in the config file, or a federated namespace); "
                "pick another name",
            )
        )
    if parsed is None or issues:
        return Checked(None, issues)
    return Checked(parsed.backends[0])


class ManagedBackends:
    """The operator's backends: validated, stored, started."""

    def __init__(
        self,
        gateway: Gateway,
        repo: ManagedBackendRepository,
        replaced: Callable[[str], None] | None = None,
    ) -> None:
        """`replaced(name)`: told when a backend is (re)started from a new definition, so sessions
        opened from the old one (tenants' connections) are closed."""
        self.gateway = gateway
        self.repo = repo
        self._replaced = replaced
        self.managed: set[str] = set()
        """Names of the backends this service started (the UI offers Edit for these only)."""
        self._seen: dict[str, float] = {}
        """Name → the stored version this gateway runs (`updated_at`)."""

    def reserved(self) -> set[str]:
        """Names a new backend may not take: the config file's and the federated namespaces'."""
        config = self.gateway.config
        return {
            *(backend.name for backend in config.backends),
            *(namespace.name for namespace in config.federation.namespaces),
            *(backend.name for backend in self.gateway.federation.backends()),
        }

    def check(self, entry: dict[str, Any], *, replacing: str | None = None) -> Checked:
        taken = self.reserved() | (self.managed - {replacing} if replacing else self.managed)
        if replacing is not None and entry.get("name") != replacing:
            return Checked(None, [Problem(f"{ENTRY_PATH}.name", "a backend's name cannot be changed")])
        return check_entry(entry, self.gateway, taken=taken)

    async def put(self, entry: dict[str, Any], config: BackendConfig, *, actor: Actor | None) -> bool:
        """Store a checked entry, then (re)start its backend; True when it is new."""
        created, stored_at = await self.repo.put(entry, config.transport, actor=actor)
        self.managed.add(config.name)
        self._seen[config.name] = stored_at
        await self._start(config)
        return created

    async def _start(self, config: BackendConfig) -> None:
        await self.gateway.put_backend(config)
        if self._replaced is not None:
            self._replaced(config.name)

    async def delete(self, name: str, *, actor: Actor | None) -> bool:
        """Remove a backend added here: from the database (audited), then stop it; False if unknown."""
        if name not in self.managed or not await self.repo.delete(name, actor=actor):
            return False
        await self._stop(name)
        return True

    async def _stop(self, name: str) -> None:
        self.managed.discard(name)
        self._seen.pop(name, None)
        await self.gateway.drop_backend(name)
        if self._replaced is not None:
            self._replaced(name)

    async def start(self) -> None:
        """Start every stored backend (at the gateway's start)."""
        await self.refresh()

    async def refresh(self) -> None:
        """Start what was added, and restart what was changed, since this gateway last looked (by
        another gateway on the database too): one query when nothing changed. An entry that no
        longer validates, or cannot be decrypted, is logged and skipped, never stopping the others."""
        try:
            versions = await self.repo.versions()
        except Exception as error:  # noqa: BLE001 - serving goes on; the next look tries again
            logger.error("backends added in the UI cannot be listed: %s", error)
            return
        changed = [name for name, at in sorted(versions.items()) if self._seen.get(name) != at]
        for name in changed:
            await self._start_stored(name, versions[name])
        for name in [name for name in self._seen if name not in versions]:  # deleted elsewhere
            await self._stop(name)

    async def _start_stored(self, name: str, stored_at: float) -> None:
        try:
            entry = await self.repo.get(name)
        except Exception as error:  # noqa: BLE001 - a wrong key: reported, the others still start
            logger.error("backend %r added in the UI cannot be read: %s", name, error)
            self._seen[name] = stored_at
            return
        if entry is None:
            return
        self._seen[name] = stored_at
        checked = check_entry(entry, self.gateway, taken=self.reserved())
        if checked.config is None:
            logger.error(
                "backend %r added in the UI is not started: %s",
                name,
                "; ".join(str(problem) for problem in checked.problems),
            )
            return
        self.managed.add(name)
        await self._start(checked.config)
