"""kappa's RL algorithms in pure torch: the one implementation every backend and the verl
plug-in use (docs/algorithms.md), matching the semantics of verl 0.9.1's ``core_algos``.
Import each name from its module (this package imports nothing, so the bundles load without
torch). Nothing here imports the rest of ``orchestrator``, nor mlflow, ray, sqlalchemy or
verl; errors are :class:`~orchestrator.algorithms.errors.AlgorithmError`."""
