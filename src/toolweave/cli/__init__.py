"""The `toolweave` command: parse, call the library or the services, print. One module per command."""

from __future__ import annotations

import typer

from toolweave.cli import audit, clients, export, federate, keys, oauth, proxy, runs, serve, tools, validate

app = typer.Typer(
    name="toolweave",
    help="A composite tool gateway for AI agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain help: the rich one shows a type beside every flag (`--stdio <bool>`) and costs more to import
    rich_markup_mode=None,
)


def _print_version(wanted: bool) -> None:
    if wanted:
        from toolweave import __version__

        print(f"toolweave {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
    ),
) -> None:
    """A composite tool gateway for AI agents."""


app.command()(serve.serve)
app.command()(tools.tools)
app.command()(tools.call)
app.command()(validate.validate)
app.add_typer(keys.keys_app, name="keys")
app.add_typer(runs.runs_app, name="runs")
app.add_typer(proxy.proxy_app, name="proxy")
app.command()(audit.audit)
app.command("export")(export.export_command)
app.command()(federate.federate)
app.command()(clients.init)
app.command()(clients.connect)
app.command()(oauth.login)
app.command()(oauth.logout)


def main() -> None:  # pragma: no cover
    app()


__all__ = ["app", "main"]
