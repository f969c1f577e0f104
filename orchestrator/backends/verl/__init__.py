"""The verl backend: cells as ``python3 -m verl.trainer.main_ppo`` launches (docs/verl.md).
Importing it does not import verl: composition against verl's config runs in a subprocess
(:mod:`~orchestrator.backends.verl.preflight`)."""

from __future__ import annotations

from orchestrator.backends.verl.command import verl_command
from orchestrator.backends.verl.phases import Phase, phases
from orchestrator.backends.verl.settings import VerlSettings

__all__ = ["Phase", "VerlSettings", "phases", "verl_command"]
