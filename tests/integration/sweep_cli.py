"""``kappa`` with the fake test backend registered: ``python sweep_cli.py submit ...``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from orchestrator.backends import BACKENDS

BACKENDS["fake"] = "sweep_fixtures:FakeBackend"
BACKENDS["faulty"] = "fault_fixtures:FaultBackend"
BACKENDS["spread"] = "ray_placement_fixtures:SpreadBackend"


def _main() -> None:
    try:
        from orchestrator.cli.app import main
    except ModuleNotFoundError:
        # Another command group of the full app is not importable (yet): run the sweep
        # commands alone, with the app's error handling (exit 2 for user errors).
        import typer

        from orchestrator.cli import sweep_cmd
        from orchestrator.errors import UserInputError

        app = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
        sweep_cmd.register(app)

        def main() -> None:
            try:
                app()
            except UserInputError as exc:
                typer.echo(f"error: {exc.render()}", err=True)
                sys.exit(exc.exit_code)

    main()


if __name__ == "__main__":
    sys.argv[0] = "kappa"
    _main()
