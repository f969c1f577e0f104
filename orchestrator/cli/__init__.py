"""Command-line interface (typer). See :mod:`orchestrator.cli.app`."""
