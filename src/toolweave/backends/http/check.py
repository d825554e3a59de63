"""What `toolweave validate` says about HTTP API backends: document problems (fail) and skips (warn).

Offline, a local document is read, converted and validated in this process; a
document URL is not fetched. Online, the started backend already converted its
document and validates it in a child process; `live_checks` waits for that.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from toolweave.backends.http.auth import plan_auth, supplied_parameters
from toolweave.backends.http.naming import name_room
from toolweave.backends.openapi import (
    ConvertOptions,
    DocumentUnusable,
    convert,
    is_url,
    parse_document,
    read_file,
)
from toolweave.backends.openapi.validation import validate_document
from toolweave.config.models import BackendConfig
from toolweave.problems import Problem

if TYPE_CHECKING:
    from toolweave.backends.base import Backend

Report = tuple[list[Problem], list[Problem]]
"""(problems, warnings), each at its backend's path in the config (`backends[0] (name)`)."""


def offline_checks(backends: list[BackendConfig]) -> Report:
    problems: list[Problem] = []
    warnings: list[Problem] = []
    for index, config in enumerate(backends):
        where = f"backends[{index}] ({config.name})"
        if not config.openapi:
            continue
        if is_url(config.openapi):
            warnings.append(Problem(where, f"the document {config.openapi} is not fetched with --offline"))
            continue
        try:
            raw, source = read_file(config.openapi, Path.cwd())
            document = parse_document(raw, source)
            plan = plan_auth(config.auth, document.data)
        except (DocumentUnusable, ValueError) as error:
            problems.append(Problem(where, str(error)))
            continue
        options = ConvertOptions(
            include=config.include,
            exclude=config.exclude,
            name_room=name_room(config),
            supplied=supplied_parameters(plan, config.headers),
            output_schema=config.output_schema,
        )
        conversion = convert(document, options)
        if not (config.base_url or conversion.base_url):
            problems.append(Problem(where, "the document names no absolute server URL; set base_url"))
        problems.extend(Problem(where, f"{source}{problem}") for problem in validate_document(document.data))
        warnings.extend(Problem(where, f"skipped {problem}") for problem in conversion.skipped)
        warnings.extend(Problem(where, f"note {problem}") for problem in conversion.notes)
    return problems, warnings


async def live_checks(backends: list[Backend], configs: list[BackendConfig]) -> Report:
    from toolweave.backends.http.backend import HttpApiBackend

    problems: list[Problem] = []
    warnings: list[Problem] = []
    by_name = {backend.name: backend for backend in backends}
    for index, config in enumerate(configs):
        backend = by_name.get(config.name)
        if not isinstance(backend, HttpApiBackend) or backend.status != "connected":
            continue
        where = f"backends[{index}] ({config.name})"
        problems.extend(Problem(where, problem) for problem in await backend.problems())
        warnings.extend(Problem(where, warning) for warning in backend.warnings())
    return problems, warnings
