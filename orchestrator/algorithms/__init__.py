"""kappa's RL algorithms in pure torch: the one implementation every backend uses.

Advantage constructions (``advantages``), policy losses (``policy_losses``,
``covariance_losses``), aggregation (``masking``), KL estimators (``kl``), reward
transforms (``rewards``), DAPO helpers (``dapo``), entropy and diagnostics, the advantage
table (``sharpness``) and the baseline bundles (``bundles``), as defined in
docs/algorithms.md and matching the semantics of verl 0.9.1's ``core_algos``. Import
each name from the module that defines it: this package itself imports nothing, so the
bundles load without torch. Nothing here imports the rest of ``orchestrator``, nor
mlflow, ray, sqlalchemy or verl; errors are :class:`~orchestrator.algorithms.errors.AlgorithmError`.
"""
