"""The verl backend: cells as ``python3 -m verl.trainer.main_ppo`` launches (docs/verl.md).
Importing it does not import verl: composition against verl's config runs in a subprocess
(:mod:`~orchestrator.backends.verl.preflight`)."""
