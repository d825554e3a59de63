from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text, update

from toolweave.store import VALID_SCOPES, Database, KeyRepository, NotFound, TenantRepository
from toolweave.store.tables import api_keys


@pytest.fixture
def keys(db: Database) -> KeyRepository:
    return KeyRepository(db)


async def test_create_returns_the_plaintext_once(keys: KeyRepository) -> None:
    info, plaintext = await keys.create("acme", ["tools:call", "tools:read", "tools:call"], name="ci")
    assert plaintext.startswith("tw_") and len(plaintext) == 46
    assert info.prefix == plaintext[:11]
    assert info.scopes == ("tools:call", "tools:read")
    assert (info.tenant, info.name, info.revoked) == ("acme", "ci", False)
    assert info.created_at.tzinfo is not None
    listed = await keys.list("acme")
    assert [k.id for k in listed] == [info.id]
    assert not hasattr(listed[0], "key_hash")


async def test_keys_are_unique(keys: KeyRepository) -> None:
    plaintexts = {(await keys.create("acme", ["tools:read"]))[1] for _ in range(10)}
    assert len(plaintexts) == 10


async def test_verify_accepts_the_key_and_records_its_use(keys: KeyRepository) -> None:
    info, plaintext = await keys.create("acme", ["tools:admin"])
    verified = await keys.verify(plaintext)
    assert verified is not None
    assert (verified.id, verified.tenant, verified.scopes) == (info.id, "acme", ("tools:admin",))
    assert verified.last_used_at is not None
    assert (await keys.get(info.id)).last_used_at == verified.last_used_at


async def test_last_used_is_refreshed_at_most_once_a_minute(db: Database, keys: KeyRepository) -> None:
    info, plaintext = await keys.create("acme", ["tools:read"])
    first = await keys.verify(plaintext)
    second = await keys.verify(plaintext)
    assert first is not None and second is not None
    assert second.last_used_at == first.last_used_at
    assert first.last_used_at is not None
    older = first.last_used_at - timedelta(minutes=5)
    async with db.write() as conn:
        await conn.execute(update(api_keys).where(api_keys.c.id == info.id).values(last_used_at=older))
    third = await keys.verify(plaintext)
    assert third is not None and third.last_used_at is not None
    assert third.last_used_at > older + timedelta(minutes=4)


@pytest.mark.parametrize(
    "candidate",
    ["", "tw_", "nope", "tw_" + "A" * 43, "tw_" + "A" * 44, "Bearer tw_x", None, 42],
)
async def test_verify_rejects_unknown_or_malformed_keys(keys: KeyRepository, candidate: object) -> None:
    await keys.create("acme", ["tools:read"])
    assert await keys.verify(candidate) is None  # type: ignore[arg-type]


async def test_verify_rejects_a_key_differing_after_the_prefix(keys: KeyRepository) -> None:
    _, plaintext = await keys.create("acme", ["tools:read"])
    tampered = plaintext[:-1] + ("A" if plaintext[-1] != "A" else "B")
    assert await keys.verify(tampered) is None


async def test_revoked_keys_no_longer_verify(keys: KeyRepository) -> None:
    info, plaintext = await keys.create("acme", ["tools:call"])
    revoked = await keys.revoke(info.id)
    assert revoked.revoked and revoked.revoked_at is not None
    assert await keys.verify(plaintext) is None
    again = await keys.revoke(info.id)
    assert again.revoked_at == revoked.revoked_at
    assert [k.id for k in await keys.list("acme", include_revoked=False)] == []
    assert [k.id for k in await keys.list("acme")] == [info.id]


async def test_revoke_and_get_unknown_ids(keys: KeyRepository) -> None:
    with pytest.raises(NotFound, match="nope"):
        await keys.revoke("nope")
    with pytest.raises(NotFound):
        await keys.get("nope")


async def test_tenants_cannot_reach_each_others_keys(keys: KeyRepository) -> None:
    info, _ = await keys.create("acme", ["tools:read"])
    await keys.create("globex", ["tools:read"])
    with pytest.raises(NotFound):
        await keys.revoke(info.id, tenant="globex")
    with pytest.raises(NotFound):
        await keys.get(info.id, tenant="globex")
    assert {k.tenant for k in await keys.list()} == {"acme", "globex"}
    assert {k.tenant for k in await keys.list("globex")} == {"globex"}


@pytest.mark.parametrize(
    ("scopes", "message"),
    [
        (["tools:read", "admin", "tools:*"], r"invalid scope\(s\): admin, tools:\*"),
        ([], "at least one scope"),
        ("tools:write", r"invalid scope\(s\): tools:write"),
    ],
)
async def test_invalid_scopes_are_rejected(keys: KeyRepository, scopes: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        await keys.create("acme", scopes)  # type: ignore[arg-type]
    assert await keys.list() == []


async def test_a_single_scope_string_is_accepted(keys: KeyRepository) -> None:
    info, _ = await keys.create("acme", "tools:read")
    assert info.scopes == ("tools:read",)
    assert {"tools:read", "tools:call", "tools:admin", "tools:federate"} == VALID_SCOPES


async def test_overlong_names_are_rejected(keys: KeyRepository) -> None:
    with pytest.raises(ValueError, match="at most 200"):
        await keys.create("acme", ["tools:read"], name="n" * 201)


@pytest.mark.parametrize("tenant", [None, "", " acme", "a/b", "x" * 200])
async def test_bad_tenants_are_rejected(keys: KeyRepository, tenant: str | None) -> None:
    with pytest.raises(ValueError, match="tenant"):
        await keys.create(tenant, ["tools:read"])  # type: ignore[arg-type]


async def test_keys_create_their_tenant_and_go_with_it(db: Database, keys: KeyRepository) -> None:
    tenants = TenantRepository(db)
    info, plaintext = await keys.create("acme", ["tools:read"])
    assert [t.id for t in await tenants.list()] == ["acme"]
    await tenants.delete("acme")
    assert await keys.verify(plaintext) is None
    with pytest.raises(NotFound):
        await keys.get(info.id)
    with pytest.raises(NotFound):
        await tenants.delete("acme")


async def test_only_the_hash_is_stored(db: Database, keys: KeyRepository) -> None:
    _, plaintext = await keys.create("acme", ["tools:read"], name="ci")
    async with db.read() as conn:
        rows = (await conn.execute(text("SELECT * FROM api_keys"))).all()
    dumped = repr([tuple(row) for row in rows])
    assert plaintext not in dumped
    assert plaintext[11:] not in dumped
