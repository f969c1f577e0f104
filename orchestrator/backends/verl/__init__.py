"""The verl backend: cells as ``python3 -m verl.trainer.main_ppo`` launches (docs/verl.md).

Importing this package does not import verl: composition against verl's config happens
in a subprocess (:mod:`~orchestrator.backends.verl.preflight`).
"""

from __future__ import annotations

from orchestrator.backends.verl.command import verl_command
from orchestrator.backends.verl.phases import Phase, phases
from orchestrator.backends.verl.settings import VerlSettings

__all__ = ["Phase", "VerlSettings", "phases", "verl_command"]
