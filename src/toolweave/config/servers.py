"""`[[servers]]`: virtual servers, each a named selection of the catalog served at `/servers/{name}/mcp`.

A virtual server selects exposed names (`tools`, globs or `re:`), whole backends or federated
namespaces (`backends`), and tagged tools (`tags`); `hide` takes names out again. It may
rename (`overrides.<tool>.name`) or re-describe tools for its own clients, list them all or
in search mode (`tool_exposure`, `pinned`), and serve a subset of the resources and prompts.
`access` says who may use it (tenants, API-key scopes, IdP claims); empty: whoever may use `/mcp`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from toolweave.config.patterns import pattern_problem
from toolweave.fields import EXPOSED_NAME_RE, StrictModel
from toolweave.problems import Problem, join_path
from toolweave.suggest import did_you_mean

SERVER_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
"""A virtual server's name: one URL path segment (`/servers/{name}/mcp`)."""
TAG_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.:-]{0,63}$")
"""A tool tag (`[backends.tools.<tool>] tags`, a virtual server's `tags`)."""


def _check_pattern(value: str) -> str:
    problem = pattern_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _check_tag(value: str) -> str:
    if not TAG_RE.match(value):
        raise ValueError(f"tag {value!r} must match {TAG_RE.pattern}")
    return value


NamePattern = Annotated[str, AfterValidator(_check_pattern)]
Tag = Annotated[str, AfterValidator(_check_tag)]


class ServerToolOverride(StrictModel):
    """How one selected tool looks on this server only (`[servers.overrides.<exposed name>]`)."""

    name: str | None = None
    """Its name on this server (the catalog's name is then not listed here)."""
    description: str | None = Field(default=None, max_length=16_384)

    @field_validator("name")
    @classmethod
    def _alias(cls, value: str | None) -> str | None:
        if value is not None and not EXPOSED_NAME_RE.match(value):
            raise ValueError(f"alias {value!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
        return value


class ServerAccess(StrictModel):
    """Who may use a virtual server: any match admits. All empty: whoever may use `/mcp`."""

    tenants: list[str] = Field(default_factory=list, max_length=256)
    scopes: list[str] = Field(default_factory=list, max_length=64)
    """API-key (or token) scopes, e.g. `support:use`; holding any one admits."""
    claims: dict[str, list[str]] = Field(default_factory=dict, max_length=32)
    """IdP token claims: `{groups = ["support"]}` admits a token whose `groups` claim holds `support`."""

    @property
    def open(self) -> bool:
        return not (self.tenants or self.scopes or self.claims)


class ServerConfig(StrictModel):
    """One virtual server."""

    name: str
    title: str | None = Field(default=None, max_length=200)
    """Shown to clients (`serverInfo.title`) and in the UI."""
    description: str | None = Field(default=None, max_length=2000)
    instructions: str | None = Field(default=None, max_length=16_384)
    """What an MCP client's model is told about this server (`initialize`'s `instructions`)."""
    tools: list[NamePattern] = Field(default_factory=list, max_length=1024)
    """Exposed names (globs, `re:<RE2>`): backend tools, composites and federated tools alike."""
    backends: list[str] = Field(default_factory=list, max_length=256)
    """Backends or federated namespaces whose listed tools are all selected."""
    tags: list[Tag] = Field(default_factory=list, max_length=64)
    """Tools carrying any of these tags (`[backends.tools.<tool>] tags`) are selected."""
    hide: list[NamePattern] = Field(default_factory=list, max_length=1024)
    """Exposed names taken out of what the other keys selected."""
    overrides: dict[str, ServerToolOverride] = Field(default_factory=dict, max_length=1024)
    """Per exposed name: an alias or description on this server only."""
    tool_exposure: Literal["all", "search"] | None = None
    """`all` or `search` (find_tools + call_tool); default: `gateway.tool_exposure`."""
    pinned: list[str] = Field(default_factory=list, max_length=256)
    """Names (as this server lists them) that stay listed in search mode."""
    resources: list[NamePattern] | None = None
    """Resource URIs served (globs, `re:`); default: those of the `backends` it names."""
    prompts: list[NamePattern] | None = None
    """Prompt names served (globs, `re:`); default: those of the `backends` it names."""
    access: ServerAccess = Field(default_factory=ServerAccess)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SERVER_NAME_RE.match(value):
            raise ValueError(f"server name {value!r} must match {SERVER_NAME_RE.pattern}")
        return value

    @model_validator(mode="after")
    def _selects_something(self) -> ServerConfig:
        if not (self.tools or self.backends or self.tags):
            raise ValueError("a server selects nothing: give 'tools', 'backends' or 'tags'")
        aliases = [o.name for o in self.overrides.values() if o.name]
        duplicates = sorted({a for a in aliases if aliases.count(a) > 1})
        if duplicates:
            raise ValueError(f"overrides give the same name to several tools: {', '.join(duplicates)}")
        return self


def server_problems(servers: list[ServerConfig], backends: list[str]) -> list[Problem]:
    """Problems across `[[servers]]`: duplicate names, `backends` naming no backend or namespace."""
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for index, server in enumerate(servers):
        if server.name in seen:
            problems.append(
                Problem(
                    join_path("servers", index, "name"),
                    f"duplicate server name {server.name!r} (also servers[{seen[server.name]}])",
                )
            )
        seen.setdefault(server.name, index)
        for position, backend in enumerate(server.backends):
            if backend not in backends:
                problems.append(
                    Problem(
                        join_path("servers", index, "backends", position),
                        f"unknown backend or federated namespace {backend!r} "
                        f"(known: {', '.join(sorted(backends)) or 'none'}){did_you_mean(backend, backends)}",
                    )
                )
    return problems
