"""The backend form of the web UI: its fields to a `[[backends]]` entry and back, secrets write-only.

A secret (an environment variable's value, a header's value, an API's token or key) is never put
back into the page: editing shows the names alone, and a name left alone keeps the stored value —
`API_KEY` keeps it, `API_KEY=new` replaces it, a line removed drops it. The auth secret's box is
always empty; left empty it keeps the stored one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from toolweave.common_types import object_at
from toolweave.problems import Problem

TRANSPORTS = ("stdio", "http", "openapi")
AUTH_TYPES = ("none", "bearer", "api_key")
AUTH_PLACES = ("header", "query", "cookie")
MAX_FIELD = 4000
MAX_LINES = 64
FIELDS: tuple[str, ...] = (
    "name",
    "transport",
    "description",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
)
FIELDS += ("openapi", "base_url", "include", "auth")
PATH = re.compile(r"^backends\[0\]\.?([A-Za-z_]*)")


@dataclass(slots=True)
class BackendForm:
    """What the form shows: every field as text (secret values left out)."""

    name: str = ""
    transport: str = "stdio"
    description: str = ""
    command: str = ""
    args: str = ""
    env: str = ""
    cwd: str = ""
    url: str = ""
    headers: str = ""
    openapi: str = ""
    base_url: str = ""
    include: str = ""
    auth_type: str = "none"
    auth_name: str = ""
    auth_in: str = "header"
    auth_secret: str = ""
    secret_stored: bool = False
    """An auth secret is stored: an empty box keeps it."""
    problems: list[Problem] = field(default_factory=list)
    """Problems of the form itself (a secret line without a value and nothing stored)."""


def _text(posted: Any, key: str) -> str:
    value = posted.get(key)
    return value.strip()[:MAX_FIELD] if isinstance(value, str) else ""


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()][:MAX_LINES]


def read_form(posted: Any) -> BackendForm:
    transport = _text(posted, "transport")
    auth_type = _text(posted, "auth_type")
    auth_in = _text(posted, "auth_in")
    return BackendForm(
        name=_text(posted, "name"),
        transport=transport if transport in TRANSPORTS else "stdio",
        description=_text(posted, "description"),
        command=_text(posted, "command"),
        args=_text(posted, "args"),
        env=_text(posted, "env"),
        cwd=_text(posted, "cwd"),
        url=_text(posted, "url"),
        headers=_text(posted, "headers"),
        openapi=_text(posted, "openapi"),
        base_url=_text(posted, "base_url"),
        include=_text(posted, "include"),
        auth_type=auth_type if auth_type in AUTH_TYPES else "none",
        auth_name=_text(posted, "auth_name"),
        auth_in=auth_in if auth_in in AUTH_PLACES else "header",
        auth_secret=_text(posted, "auth_secret"),
    )


def _pairs(text: str, sep: str, stored: dict[str, str], slot: str, problems: list[Problem]) -> dict[str, str]:
    """`NAME<sep>value` lines; a name alone keeps its stored value (write-only secrets)."""
    found: dict[str, str] = {}
    for line in _lines(text):
        name, given, value = line.partition(sep)
        name = name.strip()
        if given:
            found[name] = value.strip()
        elif name in stored:
            found[name] = stored[name]
        else:
            problems.append(Problem(f"backends[0].{slot}", f"{name!r} has no value: write {name}{sep}value"))
    return found


def to_entry(form: BackendForm, stored: dict[str, Any] | None) -> dict[str, Any]:
    """The `[[backends]]` entry the form describes, secrets not given again taken from `stored`."""
    old = stored or {}
    entry: dict[str, Any] = {"name": form.name}
    if form.description:
        entry["description"] = form.description
    if form.transport == "stdio":
        entry["command"] = form.command
        if form.args:
            entry["args"] = _lines(form.args)
        env = _pairs(form.env, "=", old.get("env") or {}, "env", form.problems)
        if env:
            entry["env"] = env
        if form.cwd:
            entry["cwd"] = form.cwd
    elif form.transport == "http":
        entry["url"] = form.url
        headers = _pairs(form.headers, ":", old.get("headers") or {}, "headers", form.problems)
        if headers:
            entry["headers"] = headers
    else:
        entry["openapi"] = form.openapi
        if form.base_url:
            entry["base_url"] = form.base_url
        if form.include:
            entry["include"] = _lines(form.include)
        auth = _auth(form, object_at(old, "auth"))
        if auth is not None:
            entry["auth"] = auth
    return entry


def _auth(form: BackendForm, old: dict[str, Any]) -> dict[str, Any] | None:
    if form.auth_type == "none":
        return None
    key = "token" if form.auth_type == "bearer" else "value"
    secret = form.auth_secret or (old.get(key) if old.get("type") == form.auth_type else None)
    auth: dict[str, Any] = {"type": form.auth_type}
    if secret:
        auth[key] = secret
    if form.auth_type == "api_key":
        auth.update({"name": form.auth_name, "in": form.auth_in})
    return auth


def names_only(text: str, sep: str) -> str:
    """Lines of `NAME<sep>value` with the values left out: what a refused form shows back."""
    return "\n".join(line.partition(sep)[0].strip() for line in _lines(text))


def from_entry(entry: dict[str, Any]) -> BackendForm:
    """The form of a stored entry, with every secret value left out (its name kept)."""
    auth = object_at(entry, "auth")
    transport = "stdio" if entry.get("command") else "http" if entry.get("url") else "openapi"
    return BackendForm(
        name=str(entry.get("name") or ""),
        transport=transport,
        description=str(entry.get("description") or ""),
        command=str(entry.get("command") or ""),
        args="\n".join(str(arg) for arg in entry.get("args") or []),
        env="\n".join(entry.get("env") or {}),
        cwd=str(entry.get("cwd") or ""),
        url=str(entry.get("url") or ""),
        headers="\n".join(entry.get("headers") or {}),
        openapi=str(entry.get("openapi") or ""),
        base_url=str(entry.get("base_url") or ""),
        include="\n".join(entry.get("include") or []),
        auth_type=str(auth.get("type") or "none"),
        auth_name=str(auth.get("name") or ""),
        auth_in=str(auth.get("in") or "header"),
        secret_stored=bool(auth.get("token") or auth.get("value")),
    )


def place(problems: list[Problem]) -> tuple[dict[str, list[str]], list[str]]:
    """({field: messages}, messages about the whole backend) of the config validation's problems."""
    at: dict[str, list[str]] = {}
    general: list[str] = []
    for problem in problems:
        found = PATH.match(problem.path)
        slot = found.group(1) if found else ""
        if slot in FIELDS:
            at.setdefault(slot, []).append(problem.message)
        else:
            general.append(problem.message if found else str(problem))
    return at, general
