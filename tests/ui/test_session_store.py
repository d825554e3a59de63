"""The UI's session store: CSRF derived from the cookie (no storage for anonymous browsers), logins
in the shared database (any gateway serves them), bounded per key, idle ones expire; and a huge
result is cut before it reaches the page."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import mcp_types as types
import pytest
from sqlalchemy import func, select, update

from support.api import AppFactory, database_url, drop_schema
from support.configs import python_backend
from toolweave.server.ui.sessions import COOKIE, SessionStore
from toolweave.server.ui.try_view import MAX_SHOWN, result_view
from toolweave.store import Database
from toolweave.store.tables import ui_sessions
from toolweave.store.ui_sessions import MAX_PER_KEY, UiSessionRepository


@pytest.fixture
async def db() -> AsyncIterator[Database]:
    database = Database.from_url("sqlite:///:memory:")
    await database.start()
    yield database
    await database.close()


async def rows(db: Database) -> int:
    async with db.read() as conn:
        return int((await conn.execute(select(func.count()).select_from(ui_sessions))).scalar_one())


async def test_two_gateways_on_one_database_serve_the_same_browser(db: Database) -> None:
    here, there = (SessionStore(UiSessionRepository(db, idle_seconds=60)) for _ in range(2))
    anonymous = here.create()  # a login form served here...
    form = await there.get(anonymous.id)  # ...posted there: the same CSRF token is expected
    assert form is not None and form.csrf == anonymous.csrf and form.csrf_matches(anonymous.csrf)
    assert not form.csrf_matches(None) and not form.csrf_matches("forged")
    assert await rows(db) == 0  # an anonymous browser costs nothing stored
    login = await there.log_in("key1")
    seen = await here.get(login.id)
    assert seen is not None and seen.key_id == "key1" and seen.csrf == login.csrf != anonymous.csrf
    async with db.read() as conn:
        stored = (await conn.execute(select(ui_sessions))).one()
    assert login.id not in (stored.id_hash, stored.key_id)  # the cookie itself is never stored
    await here.drop(login.id)  # a logout on one gateway ends the session on every gateway
    after = await there.get(login.id)
    assert after is not None and after.key_id is None


async def test_malformed_cookies_are_no_session(db: Database) -> None:
    store = SessionStore(UiSessionRepository(db, idle_seconds=60))
    for cookie in (None, "", "x" * 65, "has space", "ü"):
        assert await store.get(cookie) is None


async def test_idle_logins_expire_and_each_key_holds_a_bounded_number(db: Database) -> None:
    repository = UiSessionRepository(db, idle_seconds=60)
    store = SessionStore(repository)
    old = await store.log_in("key1")
    async with db.write() as conn:
        await conn.execute(update(ui_sessions).values(last_seen=time.time() - 61))
    expired = await store.get(old.id)
    assert expired is not None and expired.key_id is None and await rows(db) == 0
    sessions = [await store.log_in("key2") for _ in range(MAX_PER_KEY + 5)]
    assert await rows(db) == MAX_PER_KEY
    newest = await store.get(sessions[-1].id)
    assert newest is not None and newest.key_id == "key2"


def test_a_huge_result_is_cut_before_the_page() -> None:
    huge = "x" * (MAX_SHOWN * 3)
    view = result_view(
        types.CallToolResult(
            content=[types.TextContent(type="text", text=huge)], structured_content={"v": huge}
        )
    )
    assert len(view.texts[0]) < MAX_SHOWN + 100 and "more characters not shown" in view.texts[0]
    assert view.structured is None and "more characters not shown" in view.other[0]


@pytest.fixture
async def shared_postgres(tmp_path: Path, api_env: None) -> AsyncIterator[AppFactory]:
    """Gateways sharing one PostgreSQL schema (a SQLite file is one gateway's alone)."""
    url, schema = database_url("postgres", tmp_path)
    factory = AppFactory(url)
    try:
        yield factory
    finally:
        await factory.close_all()
        if schema is not None:
            await drop_schema(url.split("?")[0], schema)


async def test_a_login_form_from_one_gateway_posted_to_another(shared_postgres: AppFactory) -> None:
    """Two gateways on one database behind a balancer without stickiness: GET /login reaches one,
    POST /login the other, and every page after works on both; a logout on one ends it on both."""
    make_app = shared_postgres
    first = await make_app({"backends": [python_backend()]}, require_auth=True)
    second = await make_app({"backends": [python_backend()]}, require_auth=True)
    key = await first.key("alice", "tools:read")
    async with first.client() as a, second.client() as b:
        form = await a.get("/login")
        assert form.status_code == 200
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert csrf is not None
        b.cookies = a.cookies  # the one browser
        posted = await b.post("/login", data={"key": key, "csrf": csrf.group(1), "next": "/"})
        assert posted.status_code == 303 and posted.headers["location"] == "/", posted.text
        a.cookies = b.cookies
        for client in (a, b, a, b):
            page = await client.get("/")
            assert page.status_code == 200 and "alice" in page.text
        logout_csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert logout_csrf is not None
        out = await a.post("/logout", data={"csrf": logout_csrf.group(1)})
        assert out.status_code == 303
        stale = b.cookies.get(COOKIE)
        b.cookies.clear()
        b.cookies.set(COOKIE, stale or "")  # the old cookie replayed on the other gateway
        assert (await b.get("/")).status_code == 303
