"""Reading a config file: TOML or YAML, `${VAR}` expansion, all problems at once."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from toolweave.composite.kinds import parse_composite, tool_references
from toolweave.config.documents import read_documents
from toolweave.config.mcp_servers import backends_from_servers, servers_of
from toolweave.config.models import BackendConfig, Config
from toolweave.config.servers import server_problems
from toolweave.config.toolhive_servers import SERVER_KIND, is_virtual_server, translate_server
from toolweave.fields import split_tool_ref
from toolweave.problems import ConfigError, Problem, join_path, problems_from_validation
from toolweave.suggest import did_you_mean

DEFAULT_CONFIG_NAME = "toolweave.toml"

_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def default_config_path() -> Path:
    return Path(os.environ.get("TOOLWEAVE_CONFIG") or DEFAULT_CONFIG_NAME)


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """Load and validate a config file; raise ConfigError listing every problem."""
    file = Path(path) if path is not None else default_config_path()
    issues: list[Problem] = []
    raw = read_document(file, issues)
    if raw is None:
        raise ConfigError(issues, str(file))
    if not isinstance(raw, Mapping):
        raise ConfigError([Problem("", "the config must be a table/mapping at the top level")], str(file))
    config = parse_config(raw, base_dir=file.parent, source=str(file), issues=issues)
    if issues or config is None:
        raise ConfigError(issues, str(file))
    return config


def parse_config(
    raw: Mapping[str, Any],
    *,
    base_dir: Path = Path("."),
    source: str | None = None,
    issues: list[Problem] | None = None,
) -> Config | None:
    """Validate an already-parsed document. Problems are appended to `issues`."""
    own_issues = issues if issues is not None else []
    data = expand_env(dict(raw), "", own_issues)
    composite_raw = data.pop("composite_tools", [])
    if isinstance(data.get("servers"), list):
        data["servers"], imported = _server_files(data["servers"], base_dir, _separator(data), own_issues)
        if imported:
            composite_raw = [*composite_raw, *imported] if isinstance(composite_raw, list) else composite_raw
    try:
        config = Config.model_validate({**data, "source": source})
    except ValidationError as error:
        own_issues.extend(problems_from_validation(error, model=Config))
        config = None
    paths: list[str] = []
    composites = load_composites(composite_raw, base_dir, own_issues, paths)
    if config is not None:
        config = config.model_copy(
            update={"composite_tools": composites, "backends": _documents_from(config.backends, base_dir)}
        )
        backends = [(backend.name, backend.namespace) for backend in config.backends]
        separator = config.gateway.separator
        federated = [namespace.name for namespace in config.federation.namespaces]
        own_issues.extend(server_problems(config.servers, [name for name, _ in backends] + federated))
    else:  # still report duplicates and unknown references now, not after the other fixes
        backends, separator = _raw_backends(data)
        federated = []
    own_issues.extend(_cross_check(backends, separator, composites, paths, federated))
    if issues is None and own_issues:
        raise ConfigError(own_issues, source)
    return config


def _separator(data: Mapping[str, Any]) -> str:
    gateway = data.get("gateway")
    separator = gateway.get("separator") if isinstance(gateway, Mapping) else None
    return separator if isinstance(separator, str) and separator else "__"


def _server_files(
    entries: list[Any], base_dir: Path, separator: str, issues: list[Problem]
) -> tuple[list[Any], list[Any]]:
    """`[[servers]]` with each `{file = PATH}` entry replaced by the ToolHive `VirtualMCPServer`s of
    that YAML file, and the composite tools they define inline."""
    servers: list[Any] = []
    composites: list[Any] = []
    for index, entry in enumerate(entries):
        if not (isinstance(entry, Mapping) and set(entry) == {"file"}):
            servers.append(entry)
            continue
        path = join_path("servers", index, "file")
        if not isinstance(entry["file"], str) or not entry["file"]:
            issues.append(Problem(path, "must be a path to a YAML file of VirtualMCPServer resources"))
            continue
        file = Path(entry["file"]) if Path(entry["file"]).is_absolute() else base_dir / entry["file"]
        file_issues: list[Problem] = []
        docs = read_documents(file, file_issues)
        issues.extend(Problem(path, f"{file}: {issue.message}") for issue in file_issues)
        for doc_index, doc in enumerate(docs):
            where = f"{path}({file.name})" + (f"[{doc_index}]" if len(docs) > 1 else "")
            if not is_virtual_server(doc):
                issues.append(Problem(where, f"not a {SERVER_KIND} document (kind {_kind(doc)!r})"))
                continue
            try:
                server, inline = translate_server(expand_env(doc, where, issues), separator)
            except ValueError as error:
                issues.append(Problem(where, str(error)))
                continue
            servers.append(server)
            composites.extend(inline)
    return servers, composites


def _kind(doc: Any) -> Any:
    return doc.get("kind") if isinstance(doc, Mapping) else type(doc).__name__


def _documents_from(backends: list[BackendConfig], base_dir: Path) -> list[BackendConfig]:
    """A relative `openapi` path is relative to the config file's folder, like composite `file`s."""
    out = []
    for backend in backends:
        document = backend.openapi
        if document and not document.startswith(("http://", "https://")):
            path = Path(document).expanduser()
            backend = backend.model_copy(
                update={"openapi": str(path if path.is_absolute() else base_dir / path)}
            )
        out.append(backend)
    return out


def load_composites(
    entries: Any, base_dir: Path, issues: list[Problem], paths: list[str] | None = None
) -> list[BaseModel]:
    """Validate composite definitions; `paths`, when given, receives each returned model's config path."""
    if not isinstance(entries, list):
        issues.append(Problem("composite_tools", "must be a list of composite tool definitions"))
        return []
    out: list[BaseModel] = []
    for index, entry in enumerate(entries):
        path = join_path("composite_tools", index)
        if isinstance(entry, Mapping) and set(entry) == {"file"}:
            out.extend(_load_composite_file(entry["file"], base_dir, path, issues, paths))
        else:
            model = parse_composite(entry, path, issues)
            if model is not None:
                out.append(model)
                if paths is not None:
                    paths.append(path)
    return out


def _load_composite_file(
    file_value: Any, base_dir: Path, path: str, issues: list[Problem], paths: list[str] | None = None
) -> list[BaseModel]:
    if not isinstance(file_value, str) or not file_value:
        issues.append(Problem(join_path(path, "file"), "must be a path to a YAML file"))
        return []
    file = Path(file_value)
    if not file.is_absolute():
        file = base_dir / file
    file_issues: list[Problem] = []
    docs = read_documents(file, file_issues)
    for issue in file_issues:
        issues.append(Problem(join_path(path, "file"), f"{file}: {issue.message}"))
    out: list[BaseModel] = []
    for doc_index, doc in enumerate(docs):
        items = doc.get("composite_tools", doc) if isinstance(doc, Mapping) else doc
        items = items if isinstance(items, list) else [items]
        for item_index, item in enumerate(items):
            where = f"{path}({file.name})" + (f"[{doc_index}]" if len(docs) > 1 else "")
            where = join_path(where, item_index) if len(items) > 1 else where
            item = expand_env(item, where, issues)
            model = parse_composite(item, where, issues)
            if model is not None:
                out.append(model)
                if paths is not None:
                    paths.append(where)
    return out


def cross_check(config: Config) -> list[Problem]:
    """Problems across sections: duplicate names, references to unknown backends."""
    backends = [(backend.name, backend.namespace) for backend in config.backends]
    paths = [join_path("composite_tools", index) for index in range(len(config.composite_tools))]
    federated = [namespace.name for namespace in config.federation.namespaces]
    return _cross_check(backends, config.gateway.separator, config.composite_tools, paths, federated)


def _raw_backends(data: Mapping[str, Any]) -> tuple[list[tuple[Any, bool]], str]:
    """(name, namespace) of each backend entry and the separator, read from a document that failed validation."""
    entries = data.get("backends")
    backends = [
        (entry.get("name"), entry.get("namespace") is not False)
        if isinstance(entry, Mapping)
        else (None, True)
        for entry in (entries if isinstance(entries, list) else [])
    ]
    gateway = data.get("gateway")
    separator = gateway.get("separator") if isinstance(gateway, Mapping) else None
    return backends, separator if isinstance(separator, str) and separator else "__"


def _cross_check(
    backends: list[tuple[Any, bool]],
    separator: str,
    composites: list[Any],
    paths: list[str],
    federated: Sequence[str] = (),
) -> list[Problem]:
    """`paths[i]` is where `composites[i]` is in the file (invalid definitions are not in `composites`);
    `federated`: the namespaces of `federation.namespaces`, which composites may reference too."""
    issues: list[Problem] = []
    seen: dict[str, int] = {}
    for index, (name, _namespace) in enumerate(backends):
        if not isinstance(name, str):
            continue
        if name in seen:
            issues.append(
                Problem(
                    join_path("backends", index, "name"),
                    f"duplicate backend name {name!r} (also backends[{seen[name]}])",
                )
            )
        seen.setdefault(name, index)
    issues.extend(_federated_clashes(federated, seen))
    for name in federated:
        seen.setdefault(name, -1)
    names: dict[str, str] = {}
    for path, composite in zip(paths, composites, strict=True):
        name = composite.name
        if name in names:
            issues.append(
                Problem(
                    join_path(path, "name"), f"duplicate composite tool name {name!r} (also {names[name]})"
                )
            )
        names.setdefault(name, path)
    known = sorted(seen)
    prefixes = tuple(f"{name}{separator}" for name in known)
    bare_names = any(not namespace for _name, namespace in backends)
    for path, composite in zip(paths, composites, strict=True):
        for where, reference in tool_references(composite):
            parts = split_tool_ref(reference) if "{{" not in reference else None
            if parts is None or parts[0] in seen:
                continue
            # `backend.tool` is also how an exposed name with a dot looks (`docs__search.v2`)
            dotted_exposed = "/" not in reference and (bare_names or reference.startswith(prefixes))
            if not dotted_exposed:
                issues.append(
                    Problem(
                        join_path(path, where),
                        f"{reference!r} names unknown backend {parts[0]!r} "
                        f"(known backends: {', '.join(known) or 'none'}){did_you_mean(parts[0], known)}",
                    )
                )
    return issues


def _federated_clashes(federated: Sequence[str], backends: Mapping[str, int]) -> list[Problem]:
    """A federated namespace is a name of its own: neither a backend's nor another namespace's."""
    issues: list[Problem] = []
    seen: dict[str, int] = {}
    for index, name in enumerate(federated):
        path = join_path("federation.namespaces", index, "name")
        if name in backends:
            issues.append(Problem(path, f"namespace {name!r} is also the name of backends[{backends[name]}]"))
        elif name in seen:
            issues.append(
                Problem(path, f"duplicate namespace {name!r} (also federation.namespaces[{seen[name]}])")
            )
        seen.setdefault(name, index)
    return issues


# -- documents ---------------------------------------------------------------


def read_document(file: Path, issues: list[Problem]) -> Any:
    docs = read_documents(file, issues)
    if not docs:
        return None if issues else {}
    if len(docs) > 1:
        issues.append(Problem("", f"{file} holds {len(docs)} YAML documents; a config holds one"))
        return None
    servers = servers_of(docs[0])
    if servers is not None:  # an MCP client's `mcpServers` file: its servers are the backends
        backends, problems = backends_from_servers(servers)
        issues.extend(problems)
        return {"backends": backends}
    return docs[0]


def expand_env(value: Any, path: str, issues: list[Problem]) -> Any:
    """Expand `${VAR}` and `${VAR:-default}` in every string; an unset VAR without default is an issue."""
    if isinstance(value, str):
        if "${" not in value:
            return value

        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            found = os.environ.get(name)
            if found is not None and (found or default is None):
                return found
            if default is not None:
                return default
            issues.append(Problem(path, f"environment variable {name} is not set (use ${{{name}:-default}})"))
            return ""

        return _ENV_RE.sub(replace, value)
    if isinstance(value, Mapping):
        return {key: expand_env(item, join_path(path, str(key)), issues) for key, item in value.items()}
    if isinstance(value, list):
        return [expand_env(item, join_path(path, index), issues) for index, item in enumerate(value)]
    return value
