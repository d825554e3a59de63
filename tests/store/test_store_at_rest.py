"""No plaintext API key and no connection secret may reach the database, in any form."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from toolweave.store import ConnectionRepository, Database, KeyRepository, SecretBox

SECRET_VALUE = "sk-live-TOPSECRET-9f8e7d6c5b4a"


async def store_secrets(db: Database, box: SecretBox) -> str:
    keys, conns = KeyRepository(db), ConnectionRepository(db, box)
    _, plaintext = await keys.create("acme", ["tools:call"], name="ci")
    await keys.verify(plaintext)
    await conns.put("acme", "github", {"token": SECRET_VALUE})
    await conns.put("acme", "github", {"token": SECRET_VALUE, "other": SECRET_VALUE[::-1]})
    assert await conns.get("acme", "github") == {"token": SECRET_VALUE, "other": SECRET_VALUE[::-1]}
    return plaintext


def needles(plaintext: str) -> list[bytes]:
    """The key, its random part, and each secret in the encodings a careless writer might use."""
    values = [plaintext, plaintext[3:], plaintext[11:], SECRET_VALUE, SECRET_VALUE[::-1]]
    return [variant for value in values for variant in (value.encode(), value.encode("utf-16-le"))]


def database_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("toolweave.db*"))


async def test_sqlite_file_bytes_hold_no_plaintext(tmp_path: Path, box: SecretBox) -> None:
    db = Database.from_url(f"sqlite:///{tmp_path / 'toolweave.db'}")
    await db.start()
    plaintext = await store_secrets(db, box)
    files_while_open = database_files(tmp_path)
    contents_while_open = b"".join(path.read_bytes() for path in files_while_open)
    await db.close()
    contents_after = b"".join(path.read_bytes() for path in database_files(tmp_path))
    assert any(path.name.endswith("-wal") for path in files_while_open)
    assert b"github" in contents_after
    for needle in needles(plaintext):
        assert needle not in contents_while_open
        assert needle not in contents_after


@pytest.mark.parametrize("table", ["api_keys", "connections", "tenants"])
async def test_rows_hold_no_plaintext(db: Database, box: SecretBox, table: str) -> None:
    plaintext = await store_secrets(db, box)
    async with db.read() as conn:
        rows = (await conn.execute(text(f"SELECT * FROM {table}"))).all()
    dumped = repr([tuple(row) for row in rows]).encode()
    for needle in needles(plaintext):
        assert needle not in dumped
