"""The web UI's assets: Jinja2 templates and static files (vendored libraries keep their licences).

Only files live here; the routes that render them are `toolweave.server.ui`.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
