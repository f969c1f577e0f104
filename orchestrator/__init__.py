"""kappa — experiment orchestration and sweeps for RL research on language models.

The import name is ``orchestrator``; the console script is ``kappa``. Subpackages follow
the data flow: spec -> grid -> registry -> scheduler -> executors -> backends ->
tracking -> analysis. Heavy dependencies are imported lazily by each subpackage.
"""

__version__ = "0.1.0"
