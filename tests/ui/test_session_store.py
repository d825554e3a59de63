"""The UI's session store: bounded, anonymous sessions apart from logged-in ones, idle ones expire;
and a huge result is cut before it reaches the page."""

from __future__ import annotations

import time

import mcp_types as types

from toolweave.server.ui.sessions import SessionStore
from toolweave.server.ui.try_view import MAX_SHOWN, result_view


def test_a_flood_of_anonymous_sessions_never_pushes_out_a_login() -> None:
    store = SessionStore(idle_seconds=60, max_sessions=3, max_anonymous=5)
    logged_in = store.create("tw_key")
    for _ in range(1000):
        store.create()
    assert store.get(logged_in.id) is logged_in
    assert len(store) == 6  # 1 logged in + the 5 newest anonymous


def test_logged_in_sessions_are_bounded_least_recently_used_first() -> None:
    store = SessionStore(idle_seconds=60, max_sessions=2, max_anonymous=2)
    first, second = store.create("a"), store.create("b")
    assert store.get(first.id) is first  # first is now the most recently used
    store.create("c")
    assert store.get(second.id) is None and store.get(first.id) is first


def test_idle_sessions_expire_and_csrf_must_match() -> None:
    store = SessionStore(idle_seconds=0.05)
    session = store.create("tw_key")
    assert session.csrf_matches(session.csrf)
    assert not session.csrf_matches(None) and not session.csrf_matches("forged")
    time.sleep(0.1)
    assert store.get(session.id) is None


def test_a_huge_result_is_cut_before_the_page() -> None:
    huge = "x" * (MAX_SHOWN * 3)
    view = result_view(
        types.CallToolResult(
            content=[types.TextContent(type="text", text=huge)], structured_content={"v": huge}
        )
    )
    assert len(view.texts[0]) < MAX_SHOWN + 100 and "more characters not shown" in view.texts[0]
    assert view.structured is None and "more characters not shown" in view.other[0]
