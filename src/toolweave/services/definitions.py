"""Composite tools created through the API: validated, stored, merged into the gateway's catalog.

The order of a change is the whole point: validate FIRST (the definition's
own problems, a name clash with the file's composites or an exposed tool, a
trial catalog build against the live backends), and only then store it and
hand it to the gateway. A rejected create or update therefore changes
nothing, and the previous version keeps serving.

Statuses: `draft` and `disabled` definitions are stored but not served;
`active` ones are served; an active one that stops building (a tool it
references disappeared) is `degraded` with its `validationErrors`, not
served, and becomes `active` again by itself when the tool comes back — the
verdicts are re-recorded whenever the catalog changes.

Names are unique across the whole gateway (one catalog serves every
tenant), so a tenant cannot take a name another tenant already uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolweave.actor import Actor
from toolweave.catalog.catalog import Catalog, Entry
from toolweave.composite.definition import CompositeBase
from toolweave.composite.kinds import build_composite, parse_composite
from toolweave.config.models import LimitsConfig
from toolweave.gateway import Gateway
from toolweave.problems import Problem
from toolweave.schemas.check import off_loop
from toolweave.services.errors import DefinitionError
from toolweave.store import CompositeRepository, Conflict, StoredComposite, TenantRepository

logger = logging.getLogger("toolweave.definitions")

SERVED_STATUSES = ("active", "degraded")
"""Statuses whose definitions are handed to the gateway (degraded ones are retried on every rebuild)."""
USER_STATUSES = ("draft", "active", "disabled")


@dataclass(slots=True)
class _Known:
    stored: StoredComposite
    model: CompositeBase | None = None
    parse_problems: list[str] = field(default_factory=list)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: objects merge key by key, `null` removes a key, anything else replaces."""
    if not isinstance(patch, Mapping):
        return patch
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _status_change(wanted: str | None, current: str) -> str | None:
    """The status to store, or None when asking for it changes nothing (`active` on a `degraded` tool
    stays degraded until it builds again)."""
    if wanted is None or wanted == current or (wanted == "active" and current == "degraded"):
        return None
    return wanted


def parse_definition(definition: Any, path: str = "definition") -> tuple[CompositeBase | None, list[Problem]]:
    problems: list[Problem] = []
    model = parse_composite(definition, path, problems)
    return (model if not problems else None), problems


class DefinitionService:
    """Owns the API-managed definitions of one gateway (an in-memory mirror of the store)."""

    def __init__(
        self, gateway: Gateway, repo: CompositeRepository, tenants: TenantRepository, *, record: bool = True
    ) -> None:
        self.gateway = gateway
        self.repo = repo
        self._tenants = tenants
        self._record = record
        """False for read-only users (the CLI's export): verdicts are computed, never written."""
        self._known: dict[str, _Known] = {}
        self._lock = asyncio.Lock()
        self._verdict_task: asyncio.Task[None] | None = None
        self._verdict_again = False
        self._startup_task: asyncio.Task[None] | None = None
        self._unsubscribe = gateway.on_tools_changed(self._catalog_changed)
        self.on_change: Callable[[StoredComposite], None] | None = None
        """Told of every create, update and delete made here (the change feed tells other gateways)."""

    # -- startup and catalog changes ---------------------------------------

    async def load(self) -> None:
        """Read every stored definition (all tenants), serve the valid active ones, record verdicts."""
        async with self._lock:
            rows = await self.repo.list_all()
            self._known = {row.id: self._parsed(row) for row in rows}
            await self._apply()
        logger.info("loaded %d composite tool(s) from the database", len(rows))

    async def reload(self) -> bool:
        """Another gateway sharing the database changed definitions: read them all again and serve
        what changed (the gateway announces list_changed). True when what is served changed.

        Verdicts are not recorded here: the gateway that made the change recorded its own, and
        a catalog change caused by the reload re-records them as usual.
        """
        async with self._lock:
            rows = await self.repo.list_all()
            before = self._serving_key()
            known: dict[str, _Known] = {}
            for row in rows:
                old = self._known.get(row.id)
                if old is not None and old.stored.version == row.version:  # versions are immutable
                    known[row.id] = _Known(row, old.model, old.parse_problems)
                else:
                    known[row.id] = self._parsed(row)
            self._known = known
            if self._serving_key() == before:
                return False
            self.gateway.set_definitions(self._served())
        logger.info("composite tools changed in the database: now serving %d", len(self._serving()))
        return True

    def _parsed(self, row: StoredComposite) -> _Known:
        model, problems = parse_definition(row.definition)
        return _Known(row, model, [str(problem) for problem in problems])

    async def _apply(self) -> None:
        """Hand the servable definitions to the gateway (which announces list_changed), then record verdicts."""
        self.gateway.set_definitions(self._served())
        await self._record_verdicts()

    def _served(self) -> dict[str, tuple[str | None, CompositeBase]]:
        served: dict[str, tuple[str | None, CompositeBase]] = {}
        for known in self._serving():
            if known.model is not None:
                served[known.stored.name] = (known.stored.tenant, known.model)
        return served

    def _serving(self) -> list[_Known]:
        """The definitions handed to the gateway: servable, the oldest of a name first."""
        served: dict[str, _Known] = {}
        ordered = sorted(self._known.values(), key=lambda k: (k.stored.created_at, k.stored.id))
        for known in ordered:
            row = known.stored
            if row.status in SERVED_STATUSES and known.model is not None and row.name not in served:
                served[row.name] = known
        return list(served.values())

    def _serving_key(self) -> list[tuple[str, int]]:
        return [(known.stored.id, known.stored.version) for known in self._serving()]

    def _changed(self, row: StoredComposite) -> None:
        if self.on_change is not None:
            try:
                self.on_change(row)
            except Exception:
                logger.exception("announcing the change of composite tool %s failed", row.name)

    def verdict(self, known: _Known) -> list[str]:
        """Why a stored definition is not served right now (empty: it is served)."""
        if known.parse_problems:
            return list(known.parse_problems)
        row = known.stored
        catalog = self.gateway.catalog
        problems = [str(problem) for problem in catalog.degraded.get(row.name, [])]
        if problems:
            return problems
        entry = catalog.get(row.name)
        if entry is None or entry.composite is None or entry.owner != row.tenant:
            clashes = [i.message for i in catalog.issues if i.subject == row.name]
            return clashes or [f"the name {row.name!r} is already used by another tool on this gateway"]
        return []

    async def _record_verdicts(self) -> None:
        if not self._record:
            return
        for known in list(self._known.values()):
            row = known.stored
            if row.status not in SERVED_STATUSES:
                continue
            problems = self.verdict(known)
            if problems and self.gateway.backends_starting():
                self._verdicts_after_first_connections()  # a tool it names may just not be up yet
                continue
            if tuple(problems) == (row.validation_errors or ()):
                continue
            try:
                known.stored = await self.repo.set_validation(row.id, problems or None)
            except Exception:
                logger.exception("recording the status of composite tool %s failed", row.name)
                continue
            if problems:
                logger.warning("composite tool %s is degraded: %s", row.name, "; ".join(problems))
            else:
                logger.info("composite tool %s is active again", row.name)

    def _verdicts_after_first_connections(self) -> None:
        """Record verdicts again once every backend has finished its first connection attempt: one
        that failed to start leaves the catalog's listing unchanged, which alone would not."""
        if self._startup_task is not None and not self._startup_task.done():
            return

        async def after_start() -> None:
            await self.gateway.wait_for_first_connections()
            self._catalog_changed()

        with contextlib.suppress(RuntimeError):  # no running loop: nothing to schedule
            self._startup_task = asyncio.get_running_loop().create_task(after_start())

    def _catalog_changed(self) -> None:
        """A backend's tools changed: re-record verdicts soon (coalesced, never concurrently)."""
        self._verdict_again = True
        if self._verdict_task is None or self._verdict_task.done():
            with contextlib.suppress(RuntimeError):  # no running loop: nothing to schedule
                self._verdict_task = asyncio.get_running_loop().create_task(self._verdicts_after_change())

    async def _verdicts_after_change(self) -> None:
        while self._verdict_again:
            self._verdict_again = False
            async with self._lock:
                await self._record_verdicts()

    async def settled(self) -> None:
        """Wait until the verdicts of the latest catalog change are recorded (tests, orderly shutdown)."""
        while self._verdict_task is not None and not self._verdict_task.done():
            await asyncio.shield(self._verdict_task)

    async def close(self) -> None:
        self._unsubscribe()
        if self._startup_task is not None:
            self._startup_task.cancel()
        if self._verdict_task is not None:
            with contextlib.suppress(BaseException):
                await self._verdict_task

    # -- lookups -----------------------------------------------------------

    def known(self, tool_id: str) -> _Known | None:
        return self._known.get(tool_id)

    def file_definition(self, name: str) -> CompositeBase | None:
        return next((d for d in self.gateway.config.composite_tools if d.name == name), None)

    def served_entry(self, row: StoredComposite) -> Entry | None:
        entry = self.gateway.catalog.get(row.name)
        if entry is None or entry.composite is None or entry.owner != row.tenant:
            return None
        known = self._known.get(row.id)
        return entry if known is not None and known.stored.status in SERVED_STATUSES else None

    # -- changes -----------------------------------------------------------

    async def create(
        self,
        tenant: str | None,
        definition: Mapping[str, Any],
        status: str,
        note: str | None,
        *,
        actor: Actor | None = None,
    ) -> StoredComposite:
        """`actor` is who asked, for the audit record stored with the tool (None: not audited)."""
        async with self._lock:
            model = await self._validated(definition, tenant, exclude_id=None)
            stored = await self.repo.create(tenant, definition, status=status, note=note, actor=actor)
            self._known[stored.id] = _Known(stored, model)
            await self._apply()
            self._changed(stored)
            return self._known[stored.id].stored

    async def update(
        self,
        tool_id: str,
        tenant: str | None,
        *,
        patch: Mapping[str, Any] | None,
        status: str | None,
        note: str | None,
        expected_version: int | None,
        actor: Actor | None = None,
    ) -> StoredComposite:
        """Merge `patch` into the definition and/or change the status; nothing changes unless all is valid.
        A new definition and a new status are stored in one transaction, with one audit record."""
        async with self._lock:
            current = await self.repo.get(tool_id, tenant)
            definition = merge_patch(current.definition, patch) if patch is not None else None
            model: CompositeBase | None
            if definition is not None:
                model = await self._validated(definition, current.tenant, exclude_id=current.id)
            elif status == "active" and current.status not in SERVED_STATUSES:
                model = await self._validated(
                    current.definition, current.tenant, exclude_id=current.id
                )  # activating: must build now
            else:
                model = self._known[current.id].model if current.id in self._known else None
            stored = current
            new_status = _status_change(status, current.status)
            if definition is not None:
                stored = await self.repo.update(
                    current.id,
                    tenant,
                    definition,
                    note=note,
                    expected_version=expected_version,
                    status=new_status,
                    actor=actor,
                )
                new_status = None
            elif expected_version is not None and expected_version != current.version:
                raise Conflict(
                    f"composite tool {current.name!r} is at version {current.version}, not {expected_version}: "
                    "reload it and apply the change again"
                )
            if new_status is not None:
                stored = await self.repo.set_status(current.id, tenant, new_status, actor=actor)
            if model is None:
                model, _problems = parse_definition(stored.definition)
            self._known[stored.id] = _Known(stored, model)
            await self._apply()
            self._changed(stored)
            return self._known[stored.id].stored

    async def delete(
        self, tool_id: str, tenant: str | None, *, actor: Actor | None = None
    ) -> StoredComposite:
        async with self._lock:
            current = await self.repo.get(tool_id, tenant)
            await self.repo.delete(current.id, tenant, actor=actor)
            self._known.pop(current.id, None)
            await self._apply()
            self._changed(current)
            return current

    # -- validation --------------------------------------------------------

    async def _validated(
        self, definition: Any, tenant: str | None, *, exclude_id: str | None
    ) -> CompositeBase:
        """`_validate`, but a definition refused while backends are still on their first connection
        attempt is checked again once they have finished it (at most gateway.startup_timeout): right
        after start-up the tools it names may simply not be listed yet."""
        model = await off_loop(self._model_of, definition)  # its schemas checked beside the event loop
        try:
            return self._buildable(model, tenant, exclude_id=exclude_id)
        except DefinitionError as refused:
            if refused.code != "invalid_definition" or not self.gateway.backends_starting():
                raise
        await self.gateway.wait_for_first_connections()
        return self._buildable(model, tenant, exclude_id=exclude_id)

    def _validate(self, definition: Any, tenant: str | None, *, exclude_id: str | None) -> CompositeBase:
        return self._buildable(self._model_of(definition), tenant, exclude_id=exclude_id)

    def _model_of(self, definition: Any) -> CompositeBase:
        """The definition's model, or `DefinitionError`: everything that depends on the definition alone
        (its size, its shape, its schemas), so it may run off the event loop (`schemas.off_loop`)."""
        too_big = size_problems(definition, self.gateway.config.limits)
        if too_big:
            raise DefinitionError(
                422, "definition_too_large", f"the definition has {len(too_big)} problem(s)", too_big
            )
        model, problems = parse_definition(definition)
        if model is None:
            raise DefinitionError(
                422, "invalid_definition", f"the definition has {len(problems)} problem(s)", problems
            )
        return model

    def _buildable(
        self, model: CompositeBase, tenant: str | None, *, exclude_id: str | None
    ) -> CompositeBase:
        """`model`, once its name is free for `tenant` and it builds against the current catalog."""
        self.check_name(model.name, tenant, exclude_id=exclude_id)
        problems = self.trial_problems(model, tenant, exclude_id=exclude_id)
        if problems:
            raise DefinitionError(
                422,
                "invalid_definition",
                f"the definition cannot be built against the current catalog ({len(problems)} problem(s))",
                problems,
            )
        return model

    def problems_of(
        self, definition: Any, tenant: str | None, *, exclude_id: str | None = None
    ) -> list[Problem]:
        """Every problem `create` or `update` would reject `definition` for, saving nothing: the web
        UI's builder validates as you type with the same checks as the API."""
        try:
            self._validate(definition, tenant, exclude_id=exclude_id)
        except DefinitionError as error:
            return error.problems or [Problem("definition", error.message)]
        return []

    def check_name(self, name: str, tenant: str | None, *, exclude_id: str | None) -> None:
        """409 naming both sides when `name` is taken by the file, a backend tool or another API composite
        that `tenant` sees. Names are unique across tenants, so one another tenant uses is a 409 too, but
        one that says nothing of what holds it (the same words for a composite or a federated tool)."""
        here = f"composite tool {name!r} (this request)"
        unseen = DefinitionError(
            409,
            "name_conflict",
            f"name conflict: {here} and a name already used on this gateway (names are unique across "
            "tenants); choose another name",
            [Problem("definition.name", "already used on this gateway")],
        )
        if self.file_definition(name) is not None:
            raise DefinitionError(
                409,
                "name_conflict",
                f"name conflict: {here} and composite tool {name!r} defined in the config file "
                f"({self.gateway.config.source or 'config'}); choose another name",
                [Problem("definition.name", "taken by a composite tool of the config file")],
            )
        for known in self._known.values():
            if known.stored.name == name and known.stored.id != exclude_id:
                if not _sees(tenant, known.stored.tenant):
                    raise unseen
                raise DefinitionError(
                    409,
                    "name_conflict",
                    f"name conflict: {here} and another composite tool named {name!r} on this gateway "
                    "(names are unique across tenants); choose another name",
                    [Problem("definition.name", "taken by another composite tool")],
                )
        entry = self.gateway.catalog.get(name)
        if entry is not None and entry.composite is None:
            if not _sees(tenant, entry.owner):
                raise unseen  # another tenant's federated namespace: not even its name is told
            backend = entry.backend.name if entry.backend else "?"
            hidden = " (hidden from clients)" if entry.hidden else ""
            raise DefinitionError(
                409,
                "name_conflict",
                f"name conflict: {here} and backend {backend!r} tool {entry.backend_tool!r}, "
                f"exposed as {name!r}{hidden}; choose another name",
                [Problem("definition.name", f"taken by backend {backend!r} tool {entry.backend_tool!r}")],
            )

    def trial_problems(
        self, model: CompositeBase, tenant: str | None, *, exclude_id: str | None
    ) -> list[Problem]:
        """Build a catalog with this definition (of `tenant`) added, or replacing its old version: its
        problems, if any. Built as the gateway builds it: each API definition sees what its tenant sees."""
        name = model.name
        others = [
            known
            for tool_id, known in self._known.items()
            if tool_id != exclude_id
            and known.model is not None
            and known.stored.status in SERVED_STATUSES
            and known.stored.name != name
        ]
        owners = {known.stored.name: known.stored.tenant for known in others}
        owners[name] = tenant
        gateway = self.gateway
        definitions = [*gateway.config.composite_tools, *(known.model for known in others), model]
        backends = [*gateway.backends.values(), *gateway.federation.backends()]  # as `Gateway.rebuild`
        trial = Catalog.build(
            gateway.config, backends, definitions, owners=owners, cache=gateway.catalog_cache
        )
        problems = [problem.under("definition") for problem in trial.degraded.get(name, [])]
        problems += [
            Problem("definition", i.message) for i in trial.issues if i.subject == name and not problems
        ]
        return problems

    def trial_entry(self, definition: Any, tenant: str | None) -> Entry | None:
        """The tool a stored definition would be, built against the current catalog (export of a draft)."""
        model, problems = parse_definition(definition)
        return self.build_entry(model, tenant) if model is not None and not problems else None

    def build_entry(self, model: CompositeBase, tenant: str | None) -> Entry | None:
        """Build one API definition of `tenant` against what it sees of the current catalog, without
        serving it; None when it does not build."""
        catalog = self.gateway.catalog
        hidden_ok = self.gateway.config.policy.api_composites_call_hidden
        try:
            composite = build_composite(model, catalog.seen_by(tenant, call_hidden=hidden_ok))
        except Exception:  # noqa: BLE001 - a definition that does not build has no export
            return None
        return Entry(name=composite.name, tool=composite.tool, composite=composite, tool_class="composite")


_ITEM_LISTS = ("steps", "operations", "tools", "targets", "rules")
"""Lists whose length `limits.max_definition_items` caps (they drive build and run cost)."""


def size_problems(definition: Any, limits: LimitsConfig) -> list[Problem]:
    """Every way `definition` is larger than the API stores (before it is parsed or built).

    A definition is copied into every `tools/list` answer and rebuilt on every catalog
    change, so its size is every caller's cost, not only its owner's.
    """
    # json, not orjson: a definition may hold integers past 64 bits (still JSON), which orjson refuses
    size = len(json.dumps(definition, default=str, separators=(",", ":"), ensure_ascii=False).encode())
    if size > limits.max_definition_bytes:
        return [
            Problem(
                "definition",
                f"is {size} bytes as JSON; the limit is {limits.max_definition_bytes} "
                "(limits.max_definition_bytes)",
            )
        ]
    problems: list[Problem] = []
    stack: list[tuple[str, Any]] = [("definition", definition)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, Mapping):
            for key, item in value.items():
                where = f"{path}.{key}"
                if (
                    key == "description"
                    and isinstance(item, str)
                    and len(item) > limits.max_description_chars
                ):
                    problems.append(
                        Problem(
                            where,
                            f"is {len(item)} characters; the limit is {limits.max_description_chars} "
                            "(limits.max_description_chars)",
                        )
                    )
                elif (
                    key in _ITEM_LISTS and isinstance(item, list) and len(item) > limits.max_definition_items
                ):
                    problems.append(
                        Problem(
                            where,
                            f"has {len(item)} items; the limit is {limits.max_definition_items} "
                            "(limits.max_definition_items)",
                        )
                    )
                stack.append((where, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{index}]", item) for index, item in enumerate(value))
    return sorted(problems, key=lambda problem: problem.path)


def _sees(tenant: str | None, owner: str | None) -> bool:
    """Whether a caller of `tenant` (None: the operator) sees an object of `owner` (None: shared)."""
    return tenant is None or owner is None or owner == tenant
