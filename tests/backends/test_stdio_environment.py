"""What a stdio backend's child starts with (the machine's trust store, proxies, locale; `env_passthrough`;
its own `env`), and what an agent is told when the child fails: the last lines it wrote to stderr."""

from __future__ import annotations

import os
import sys

import pytest

from support.configs import config
from support.fixtures import OpenGateway
from support.results import text
from toolweave.backends.environment import child_env
from toolweave.config import ConfigError, parse_config

PARENT = {
    "HOME": "/home/ada",
    "PATH": "/usr/bin",
    "SSL_CERT_FILE": "/etc/corp-ca.pem",
    "HTTPS_PROXY": "http://proxy:3128",
    "LANG": "de_DE.UTF-8",
    "OPENAI_API_KEY": "sk-not-for-children",
    "AWS_PROFILE": "dev",
    "AWS_REGION": "eu-west-1",
    "BASH_FUNC_x%%": "() { echo hi; }",
}


def test_a_child_gets_the_safe_set_and_its_passthrough_but_not_the_gateways_secrets() -> None:
    env = child_env({"LANG": "C"}, ["AWS_*", "BASH_FUNC_*"], parent=PARENT)
    assert env["SSL_CERT_FILE"] == "/etc/corp-ca.pem" and env["HTTPS_PROXY"] == "http://proxy:3128"
    assert env["HOME"] == "/home/ada"
    assert env["AWS_PROFILE"] == "dev" and env["AWS_REGION"] == "eu-west-1"
    assert env["LANG"] == "C", "the backend's own env wins"
    assert "OPENAI_API_KEY" not in env, "only named variables reach a child"
    assert "BASH_FUNC_x%%" not in env, "an exported shell function is never passed"
    assert env["PATH"] == os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin"])
    assert child_env({"PATH": "/opt/bin"}, parent=PARENT)["PATH"] == "/opt/bin"


def test_env_passthrough_belongs_to_stdio_backends() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(
            {"backends": [{"name": "web", "url": "http://127.0.0.1:1/mcp", "env_passthrough": ["X"]}]}
        )
    assert "'env_passthrough' needs 'command'" in str(raised.value)


async def test_a_child_that_fails_at_start_is_quoted_in_the_error_an_agent_sees(
    open_gateway: OpenGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child that prints why it cannot start and exits: its stderr says why (here, what it was given
    of the environment), and the agent's error quotes it instead of only "Connection closed"."""
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/corp-ca.pem")
    monkeypatch.setenv("CORP_TOKEN_HINT", "passed-on")
    monkeypatch.setenv("UNRELATED_SECRET", "kept-back")
    script = (
        'echo "starting up" >&2; '
        'echo "cert=$SSL_CERT_FILE hint=$CORP_TOKEN_HINT other=[$UNRELATED_SECRET]" >&2; '
        'echo "error: invalid peer certificate: UnknownIssuer" >&2; exit 1'
    )
    child = {"name": "uvxish", "command": "sh", "args": ["-c", script], "env_passthrough": ["CORP_*"]}
    gw = await open_gateway(config(child))
    backend = gw.backends["uvxish"]
    assert backend.status == "failed"
    error = backend.last_error or ""
    assert "cert=/etc/corp-ca.pem hint=passed-on other=[]" in error, error
    assert error.endswith("error: invalid peer certificate: UnknownIssuer"), error
    result = await gw.call("uvxish__anything", {})
    assert result.is_error and "invalid peer certificate" in text(result), text(result)
