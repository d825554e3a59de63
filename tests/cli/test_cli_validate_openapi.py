"""`toolweave validate` checks OpenAPI documents: offline (local files) and connected (the backend's own load)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from support.fixtures import WriteConfig
from support.paths import SERVERS
from support.processes import api_testserver, free_port
from toolweave.cli import app

runner = CliRunner()
BROKEN = {
    "openapi": "3.0.3",
    "info": {"title": "broken", "version": "1"},
    "servers": [{"url": "https://api.example.com"}],
    "paths": {
        "/pets/{petId}": {"get": {"operationId": "getPet", "responses": {"200": {"description": "ok"}}}},
        "/ok": {"get": {"operationId": "fine", "responses": {"200": {"description": "ok"}}}},
    },
}


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def flat(text: str) -> str:
    return " ".join(text.split())  # rich wraps long lines at the terminal width


def test_offline_a_good_document_passes_with_its_skips_as_warnings(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    document = tmp_path / "api.yaml"
    shutil.copy(SERVERS / "apiserver_openapi.yaml", document)
    path = write_config(
        {"backends": [{"name": "api", "openapi": "api.yaml", "base_url": "http://127.0.0.1:1"}]}
    )
    assert document.parent == path.parent  # the relative path resolves against the config's folder
    done = cli("validate", "--offline", "-c", str(path))
    assert done.exit_code == 0, done.stderr
    warnings = flat(done.stderr)
    assert "warning backends[0] (api): skipped #/paths/~1echo~1upload" in warnings
    assert "uploadFile (POST /echo/upload)" in warnings and "file upload" in warnings


def test_offline_a_broken_document_fails_with_pointers_and_operations(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(BROKEN))
    path = write_config({"backends": [{"name": "b", "openapi": str(tmp_path / "broken.yaml")}]})
    done = cli("validate", "--offline", "-c", str(path))
    assert done.exit_code == 1
    errors = flat(done.stderr)
    assert (
        "backends[0] (b):" in errors
        and "broken.yaml#/paths/~1pets~1{petId}/get (getPet (GET /pets/{petId}))" in errors
    )
    assert "Path parameter 'petId'" in errors
    assert "skipped #/paths/~1pets~1{petId}/get" in errors  # and the converter's own reason, as a warning


def test_offline_problems_that_stop_a_document_from_loading(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "relative.yaml").write_text(yaml.safe_dump({**BROKEN, "servers": [{"url": "/v1"}]}))
    url = f"http://127.0.0.1:{free_port()}/openapi.json"
    path = write_config(
        {
            "backends": [
                {"name": "bad", "openapi": "bad.json"},
                {"name": "rel", "openapi": "relative.yaml"},
                {"name": "remote", "openapi": url},
            ]
        }
    )
    done = cli("validate", "--offline", "-c", str(path))
    errors = flat(done.stderr)
    assert done.exit_code == 1
    assert "backends[0] (bad):" in errors and "not valid JSON" in errors
    assert "backends[1] (rel): the document names no absolute server URL; set base_url" in errors
    assert f"backends[2] (remote): the document {url} is not fetched with --offline" in errors


def test_connected_validation_loads_the_document_from_its_url(write_config: WriteConfig) -> None:
    with api_testserver() as base:
        path = write_config({"backends": [{"name": "api", "openapi": f"{base}/openapi.json"}]})
        done = cli("validate", "-c", str(path))
    assert done.exit_code == 0, done.stderr
    assert "skipped" in flat(done.stderr) and "xmlOnly (POST /echo/xml)" in flat(done.stderr)
    unreachable = write_config(
        {"backends": [{"name": "gone", "openapi": f"http://127.0.0.1:{free_port()}/x.json"}]}
    )
    failed = cli("validate", "-c", str(unreachable))
    assert failed.exit_code == 1 and "cannot fetch the OpenAPI document" in flat(failed.stderr)
