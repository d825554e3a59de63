"""An in-process demo backend (`python = "toolweave.demo.notes"`): a tiny team notebook."""

from __future__ import annotations

from typing import Any

from toolweave import tool

NOTES: dict[str, dict[str, str]] = {
    "n1": {
        "title": "Deploy checklist",
        "body": "Run the migrations, deploy to staging, verify health, then prod.",
    },
    "n2": {"title": "On-call handbook", "body": "Page the primary first; escalate after 15 minutes."},
    "n3": {"title": "Gateway design", "body": "One executor per session; composites re-enter through it."},
    "n4": {"title": "Search tips", "body": "Use fan-out to search notes and docs in one call."},
}


@tool(read_only=True)
def search(query: str, limit: int = 3) -> dict[str, Any]:
    """Search the team notebook.

    Args:
        query: Words to look for in note titles and bodies.
        limit: How many notes to return at most.
    """
    words = query.lower().split()
    hits = [
        {"id": note_id, "title": note["title"]}
        for note_id, note in NOTES.items()
        if any(word in (note["title"] + " " + note["body"]).lower() for word in words)
    ]
    return {"source": "notes", "query": query, "hits": hits[:limit]}


@tool(read_only=True)
def get_note(note_id: str) -> dict[str, str]:
    """Read one note by id.

    Args:
        note_id: The id from a search hit, e.g. n1.
    """
    note = NOTES.get(note_id)
    if note is None:
        raise KeyError(f"no note {note_id!r}; search first to find ids")
    return {"id": note_id, **note}


@tool(read_only=False, destructive=False, idempotent=False)
def add_note(title: str, body: str) -> dict[str, str]:
    """Add a note to the notebook.

    Args:
        title: A short title.
        body: The note's text.
    """
    note_id = f"n{len(NOTES) + 1}"
    NOTES[note_id] = {"title": title, "body": body}
    return {"id": note_id, "title": title}
