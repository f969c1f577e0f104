"""``python -m orchestrator`` is the same as the ``kappa`` command."""

from orchestrator.cli.app import main

main()
