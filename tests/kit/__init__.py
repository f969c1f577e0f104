"""The test kit: what tests share instead of each keeping its own copy.

* :mod:`kit.cli`: the ``kappa`` CLI run inside the test process (one runner).
* :mod:`kit.kappa_main`: the ``kappa`` CLI as a process, with the kit's backends registered.
* :mod:`kit.fake_backend`: the one fake backend (its process: :mod:`kit.fake_trainer`),
  and the spec writer for its sweeps.
* :mod:`kit.home`: a test's ``KAPPA_HOME`` (seeded MLflow store, short waits) and what
  the fake trainer leaves there (completions, launches).
* :mod:`kit.cells`: cells as ``orchestrator.grid`` makes them, for registry-level tests.
* :mod:`kit.idle_job`: a job handle whose job never ends (loop-level tests).
* :mod:`kit.synthetic`: synthetic sweeps (cell results, run folders) for the analysis tests.
"""
