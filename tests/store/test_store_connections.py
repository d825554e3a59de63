from __future__ import annotations

import asyncio
import logging
import stat
from pathlib import Path

import pytest
from sqlalchemy import text, update

from toolweave.store import (
    ConnectionRepository,
    Database,
    NotFound,
    SecretBox,
    SecretDict,
    SecretKeyError,
    TenantRepository,
)
from toolweave.store.tables import connections

TOKEN = "ghp_s3cr3t-token-value-0123456789"
PASSWORD = "hunter2-correct-horse-battery"


@pytest.fixture
def conns(db: Database, box: SecretBox) -> ConnectionRepository:
    return ConnectionRepository(db, box)


async def test_put_get_round_trip(conns: ConnectionRepository) -> None:
    summary = await conns.put("acme", "github", {"token": TOKEN, "password": PASSWORD})
    assert summary["backend"] == "github" and summary["keys"] == ["password", "token"]
    secrets = await conns.get("acme", "github")
    assert secrets == {"token": TOKEN, "password": PASSWORD}
    assert isinstance(secrets, dict)
    assert await conns.get("acme", "docs") is None
    assert await conns.get("globex", "github") is None


async def test_put_replaces_the_whole_set(conns: ConnectionRepository) -> None:
    await conns.put("acme", "github", {"token": TOKEN, "password": PASSWORD})
    first = (await conns.list("acme"))[0]["updated_at"]
    await conns.put("acme", "github", {"token": "new"})
    assert await conns.get("acme", "github") == {"token": "new"}
    listed = await conns.list("acme")
    assert [(c["backend"], c["keys"]) for c in listed] == [("github", ["token"])]
    assert listed[0]["updated_at"] >= first


async def test_list_shows_names_never_values(conns: ConnectionRepository) -> None:
    await conns.put("acme", "github", {"token": TOKEN})
    await conns.put("acme", "docs", {"api_key": PASSWORD})
    await conns.put("globex", "github", {"token": "other"})
    listed = await conns.list("acme")
    assert [c["backend"] for c in listed] == ["docs", "github"]
    assert TOKEN not in repr(listed) and PASSWORD not in repr(listed)
    assert set(listed[0]) == {"backend", "keys", "updated_at"}


async def test_tenantless_connections_are_separate(conns: ConnectionRepository) -> None:
    await conns.put(None, "github", {"token": "shared"})
    await conns.put("acme", "github", {"token": TOKEN})
    assert await conns.get(None, "github") == {"token": "shared"}
    assert await conns.get("acme", "github") == {"token": TOKEN}
    assert [c["backend"] for c in await conns.list(None)] == ["github"]
    await conns.put(None, "github", {"token": "shared2"})
    assert len(await conns.list(None)) == 1


async def test_delete(conns: ConnectionRepository) -> None:
    await conns.put("acme", "github", {"token": TOKEN})
    await conns.delete("acme", "github")
    assert await conns.get("acme", "github") is None
    with pytest.raises(NotFound, match="'github'"):
        await conns.delete("acme", "github")


async def test_connections_go_with_their_tenant(db: Database, conns: ConnectionRepository) -> None:
    await conns.put("acme", "github", {"token": TOKEN})
    await TenantRepository(db).delete("acme")
    assert await conns.list("acme") == []


async def test_concurrent_puts_leave_one_row(conns: ConnectionRepository) -> None:
    await asyncio.gather(*(conns.put("acme", "github", {"token": f"t{n}"}) for n in range(6)))
    assert len(await conns.list("acme")) == 1


LEAK = "value-that-must-not-leak"


@pytest.mark.parametrize(
    ("backend", "secrets", "message"),
    [
        ("GitHub", {"token": LEAK}, "invalid backend name 'GitHub'"),
        ("github", {}, "at least one secret"),
        ("github", {"token": LEAK.encode()}, "the value of secret 'token' must be a string"),
        ("github", {"": LEAK}, "non-empty strings"),
        ("github", [LEAK], "mapping"),
    ],
)
async def test_bad_input_is_rejected_without_echoing_values(
    conns: ConnectionRepository, backend: str, secrets: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        await conns.put("acme", backend, secrets)  # type: ignore[arg-type]
    assert LEAK not in str(raised.value)
    assert await conns.list("acme") == []


async def test_wrong_secret_key_is_a_clear_error_without_secrets(db: Database, box: SecretBox) -> None:
    await ConnectionRepository(db, box).put("acme", "github", {"token": TOKEN})
    wrong = ConnectionRepository(db, SecretBox("another key entirely", "TOOLWEAVE_SECRET_KEY"))
    with pytest.raises(SecretKeyError) as raised:
        await wrong.get("acme", "github")
    message = str(raised.value)
    assert "cannot decrypt the connection of tenant 'acme' to backend 'github'" in message
    assert "TOOLWEAVE_SECRET_KEY" in message
    assert TOKEN not in message and "another key" not in message
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    with pytest.raises(SecretKeyError):
        await wrong.check_key()
    await ConnectionRepository(db, box).check_key()
    assert [c["keys"] for c in await wrong.list("acme")] == [["token"]]


async def test_blobs_moved_between_tenants_are_refused(db: Database, conns: ConnectionRepository) -> None:
    await conns.put("acme", "github", {"token": TOKEN})
    await conns.put("globex", "github", {"token": "globex-token"})
    async with db.read() as conn:
        query = text("SELECT secret FROM connections WHERE tenant = 'acme'")
        acme_blob = (await conn.execute(query)).scalar_one()
    async with db.write() as conn:
        await conn.execute(
            update(connections).where(connections.c.tenant == "globex").values(secret=acme_blob)
        )
    with pytest.raises(SecretKeyError, match="another tenant or backend"):
        await conns.get("globex", "github")


def test_secret_dict_hides_values() -> None:
    secrets = SecretDict({"token": TOKEN})
    for shown in (repr(secrets), str(secrets), f"{secrets}", repr([secrets])):
        assert TOKEN not in shown and "token" in shown
    assert secrets["token"] == TOKEN


def test_secret_box_repr_hides_the_key() -> None:
    box = SecretBox("my-passphrase", "TOOLWEAVE_SECRET_KEY")
    assert "my-passphrase" not in repr(box)
    assert box.decrypt(box.encrypt(b"data"), "x") == b"data"


def test_any_string_derives_a_stable_key() -> None:
    first, second = SecretBox("pass", "a"), SecretBox("pass", "b")
    assert second.decrypt(first.encrypt(b"x"), "x") == b"x"
    with pytest.raises(SecretKeyError, match="empty"):
        SecretBox("", "a")


# -- where the key comes from ---------------------------------------------------


def test_env_secret_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOOLWEAVE_SECRET_KEY", "from-env")
    box = SecretBox.resolve(Database.from_url(f"sqlite:///{tmp_path / 'x.db'}"))
    assert box.source == "TOOLWEAVE_SECRET_KEY"
    assert SecretBox("from-env", "x").decrypt(box.encrypt(b"v"), "x") == b"v"
    assert not (tmp_path / "home" / ".toolweave").exists()


def test_default_key_file_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    db = Database.from_url(f"sqlite:///{tmp_path / 'x.db'}")
    first = SecretBox.resolve(db)
    path = tmp_path / "home" / ".toolweave" / "secret.key"
    assert first.source == str(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    second = SecretBox.resolve(db)
    assert second.decrypt(first.encrypt(b"v"), "x") == b"v"
    assert [p.name for p in path.parent.iterdir()] == ["secret.key"]


def test_key_file_from_env_and_argument(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env_file = tmp_path / "env.key"
    monkeypatch.setenv("TOOLWEAVE_SECRET_KEY_FILE", str(env_file))
    assert SecretBox.resolve(None).source == str(env_file)
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    arg_file = tmp_path / "nested" / "arg.key"
    assert SecretBox.resolve(None, key_file=arg_file).source == str(arg_file)
    assert arg_file.exists()


def test_broken_key_files_are_clear_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.key"
    empty.write_text("\n")
    with pytest.raises(SecretKeyError, match="is empty"):
        SecretBox.resolve(None, key_file=empty)
    unreadable = tmp_path / "dir.key"
    unreadable.mkdir()
    with pytest.raises(SecretKeyError, match="cannot read"):
        SecretBox.resolve(None, key_file=unreadable)


def test_loose_key_file_permissions_are_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loose = tmp_path / "loose.key"
    loose.write_text("some-key\n")
    loose.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="toolweave.store.crypto"):
        SecretBox.resolve(None, key_file=loose)
    assert "readable by other users" in caplog.text
    assert "some-key" not in caplog.text


def test_memory_databases_use_a_throwaway_key(tmp_path: Path) -> None:
    box = SecretBox.resolve(Database.from_url("sqlite:///:memory:"))
    assert "in-memory" in box.source
    assert not (tmp_path / "home" / ".toolweave").exists()


def test_postgres_requires_a_configured_key() -> None:
    with pytest.raises(SecretKeyError, match="TOOLWEAVE_SECRET_KEY"):
        SecretBox.resolve(Database.from_url("postgresql://postgres@127.0.0.1/test"))


async def test_repository_resolves_its_key_lazily(db: Database, tmp_path: Path) -> None:
    key_file = tmp_path / "lazy.key"
    repo = ConnectionRepository(db, key_file=key_file)
    assert await repo.list("acme") == []
    assert not key_file.exists()
    await repo.put("acme", "github", {"token": TOKEN})
    assert key_file.exists()
    assert TOKEN not in repr(repo)
    assert await ConnectionRepository(db, key_file=key_file).get("acme", "github") == {"token": TOKEN}
