"""`toolweave validate`: every problem of a config at once, each with its path, the file's own and
(unless --offline) those only the live backends reveal."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from toolweave.cli.common import ConfigOption, err, out, print_problem, quiet_logging

if TYPE_CHECKING:
    from toolweave.backends.base import Backend
    from toolweave.config.models import Config
    from toolweave.problems import Problem


def validate(
    config: ConfigOption = None,
    offline: Annotated[
        bool, typer.Option("--offline", help="Check the file only; do not connect to backends.")
    ] = False,
) -> None:
    """Check the config (and, unless --offline, every tool reference against the live backends).

    Every problem is printed at once, each with its path: the file's own
    problems AND those only the live backends reveal (unknown tools, schema
    conflicts, name clashes), checked for every definition that parsed.
    """
    from toolweave.config.loader import default_config_path

    path = config if config is not None else default_config_path()
    cfg, static, paths = _load_for_validation(path)
    problems = [str(issue) for issue in static]
    warnings: list[Problem] = []
    if cfg is not None and offline and any(backend.openapi for backend in cfg.backends):
        # only OpenAPI documents have offline checks; their imports (an HTTP client) cost ~0.2 s
        from toolweave.backends.http.check import offline_checks

        more, warnings = offline_checks(cfg.backends)
        problems.extend(str(problem) for problem in more)
    if cfg is not None and not offline:
        quiet_logging("critical")
        reported = {issue.path for issue in static if issue.path}
        import asyncio

        for problem in asyncio.run(_connected_problems(cfg, paths, warnings)):
            # one problem per path: a definition's own problems come back from the catalog build too,
            # and a reference to an unknown backend is also an unknown tool
            if problem.path not in reported and str(problem) not in problems:
                problems.append(str(problem))
    if problems:
        err.print(f"[bold red]{len(problems)} problem(s)[/] in {escape(str(path))}:", soft_wrap=True)
        for line in problems:
            print_problem(line)
    for warning in warnings:
        err.print(f"  [yellow]warning[/] {escape(str(warning))}", highlight=False, soft_wrap=True)
    if problems:
        raise typer.Exit(1)
    assert cfg is not None
    out.print(
        f"[green]ok[/] {cfg.source}: {len(cfg.backends)} backends, {len(cfg.composite_tools)} composites",
        soft_wrap=True,
    )


def _load_for_validation(path: Path) -> tuple[Config | None, list[Any], list[str]]:
    """(config, its problems, the config path of each composite it holds).

    When the file has problems, the config is still built from every part that
    validated (None when the top level itself is broken), so the live check can
    report the rest in the same run.
    """
    from toolweave.config.loader import expand_env, load_composites, parse_config, read_document
    from toolweave.problems import Problem

    issues: list[Problem] = []
    raw = read_document(path, issues)
    if not isinstance(raw, Mapping):
        if raw is not None:
            issues.append(Problem("", "the config must be a table/mapping at the top level"))
        return None, issues, []
    cfg = parse_config(raw, base_dir=path.parent, source=str(path), issues=issues)
    paths: list[str] = []
    entries = expand_env(raw.get("composite_tools", []), "composite_tools", [])
    load_composites(entries, path.parent, [], paths)
    if cfg is not None and len(paths) != len(cfg.composite_tools):  # cannot happen; never mislabel a problem
        paths = [f"composite_tools ({getattr(d, 'name', '?')})" for d in cfg.composite_tools]
    return cfg, issues, paths


def _not_connected(backend: Backend, waited: float) -> str:
    """Why a backend is not connected; one still on its first attempt is slow, not broken (yet)."""
    if backend.status == "starting":
        return (
            f"did not start within {waited:g} s (gateway.startup_timeout); a server that npx or uvx "
            "fetches on its first run can take longer: run validate again, or raise startup_timeout "
            "and the backend's connect_timeout"
        )
    return backend.last_error or backend.status


async def _connected_problems(cfg: Config, paths: list[str], warnings: list[Problem]) -> list[Problem]:
    """What only the live backends reveal, each problem with its path in the config file.

    HTTP API backends also report what they skipped; those go to `warnings` (printed, not failed).
    """
    from toolweave.backends.http.check import live_checks
    from toolweave.gateway import Gateway
    from toolweave.identity.check import issuer_problems
    from toolweave.problems import Problem

    problems, unusual = await issuer_problems(cfg)
    warnings.extend(unusual)
    enabled = [b for b in cfg.backends if b.enabled]
    if enabled:  # npx and uvx fetch a package on first run: say what the wait is for
        err.print(f"connecting {len(enabled)} backend(s) (at most {cfg.gateway.startup_timeout:g} s)…")
    async with Gateway(cfg) as gateway:
        documents, skips = await live_checks(list(gateway.backends.values()), cfg.backends)
        problems.extend(documents)
        warnings.extend(skips)
        for index, backend_config in enumerate(cfg.backends):
            backend = gateway.backends.get(backend_config.name)
            if backend is not None and backend.status != "connected":
                where = f"backends[{index}] ({backend.name})"
                problems.append(Problem(where, _not_connected(backend, cfg.gateway.startup_timeout)))
        path_of: dict[str, str] = {}
        for path, definition in zip(paths, cfg.composite_tools, strict=True):
            path_of.setdefault(getattr(definition, "name", ""), path)
        for issue in gateway.catalog.issues:
            message = issue.message
            if message.startswith("name conflict: composite tool") and "and composite tool" in message:
                continue  # a duplicate composite name: the file check already reported it
            at = path_of.get(issue.subject)
            if at is None:
                problems.append(Problem(issue.subject, str(issue.problem)))
            else:
                problems.append(issue.problem.under(at))
        backend_paths = {b.name: f"backends[{i}] ({b.name})" for i, b in enumerate(cfg.backends)}
        for issue in gateway.catalog.warnings:
            warnings.append(issue.problem.under(backend_paths.get(issue.subject, issue.subject)))
        servers = {server.name: index for index, server in enumerate(cfg.servers)}
        for server in gateway.servers.by_name.values():
            path = (
                f"servers[{servers[server.name]}]" if server.name in servers else f"servers ({server.name})"
            )
            problems.extend(problem.under(path) for problem in server.mistakes())
            warnings.extend(problem.under(path) for problem in server.notes())
    return problems
