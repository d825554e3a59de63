"""The REST API's FastAPI app is built once per process and serves every gateway of that process,
each request with its own gateway's runtime (`rest.RuntimeApi`)."""

from __future__ import annotations

from pathlib import Path

from support.api import AppFactory
from support.configs import python_backend
from toolweave.server.api.rest import RuntimeApi, shared_api


async def test_two_gateways_in_one_process_each_answer_with_their_own(tmp_path: Path, api_env: None) -> None:
    factories = [AppFactory(f"sqlite:///{tmp_path / name}.db") for name in ("first", "second")]
    try:
        first = await factories[0]({"backends": [python_backend("alpha")]})
        second = await factories[1]({"backends": [python_backend("beta")]}, require_auth=True)
        plaintext = await second.key("acme")
        async with first.client() as one, second.client(plaintext) as other, second.client() as nobody:
            first_tools = {tool["name"] for tool in (await one.get("/api/v1/tools")).json()["tools"]}
            second_tools = {tool["name"] for tool in (await other.get("/api/v1/tools")).json()["tools"]}
            refused = await nobody.get("/api/v1/tools")
            metrics = (await one.get("/metrics")).text
    finally:
        for factory in factories:
            await factory.close_all()
    assert first_tools and all(name.startswith("alpha__") for name in first_tools)
    assert second_tools and all(name.startswith("beta__") for name in second_tools)
    assert refused.status_code == 401  # the second gateway's own auth setting
    assert "beta__" not in metrics


def test_the_fastapi_app_is_built_once_per_process(api_env: None) -> None:
    mounted = [
        route.app
        for app in (_served_app(), _served_app())
        for route in app.routes
        if isinstance(getattr(route, "app", None), RuntimeApi)
    ]
    assert len(mounted) == 2 and mounted[0] is not mounted[1]
    assert mounted[0].api is mounted[1].api is shared_api()


def _served_app() -> object:
    from toolweave.config import parse_config
    from toolweave.server.app import server_app

    config = parse_config({"gateway": {"database": "sqlite:///:memory:"}})
    assert config is not None
    return server_app(config)
