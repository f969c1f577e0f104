"""kappa — experiment orchestration and sweeps for RL research on language models.

The import name is ``orchestrator``; the console script is ``kappa``. The write side
follows the data flow: spec -> grid (the plan) -> registry -> scheduler (with stopping,
search and notify as its hooks) -> executors -> backends -> runs (a cell's folder) and
tracking (MLflow). The read side has one home: a sweep's handle, ``sweeps.Sweep``, owns
its stored plan, its folders, recording its cells and its ``SweepStatus``; ``cli`` and
``api`` only render what it and ``analysis`` return. Heavy dependencies are imported
lazily by each subpackage (docs/architecture.md).
"""

__version__ = "0.1.0"


def version_line() -> str:
    """``kappa --version``: the installed version and, from a git checkout, the commit
    (``dirty`` when tracked files differ from it), as runs record it."""
    from orchestrator.runs.provenance import kappa_source

    code = kappa_source()
    if code["commit"] is None:
        return f"kappa {code['version']} (no git checkout)"
    return f"kappa {code['version']} (commit {code['commit']}{', dirty' if code['dirty'] else ''})"
