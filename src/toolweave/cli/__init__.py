"""The `toolweave` command (`app`): parse, call the library or the services, print."""

from toolweave.cli.main import app, main

__all__ = ["app", "main"]
