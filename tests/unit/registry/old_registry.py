"""A registry as the previous kappa left it (schema 0004): one sweep and its cells, written
with plain SQL, for the tests of what migration 0005 makes of it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text

from orchestrator.registry.engine import make_engine
from orchestrator.registry.schema import upgrade_schema

STAMP = "2026-01-01 00:00:00"


def old_registry(url: str, spec: str, cells: Sequence[tuple[str, dict[str, Any]]],
                 state: str = "pending", upgrade: bool = False) -> None:
    """Make a 0004 registry at ``url`` holding sweep ``old`` (``spec`` as its stored text)
    with ``cells`` (``(cell id, settings)``, in index order, all in ``state``); with
    ``upgrade``, upgrade it to the newest schema afterwards."""
    engine = make_engine(url)
    upgrade_schema(engine, "0004_scheduler_lease")
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO sweeps (id, name, backend, spec_text, spec_hash, created_at,"
            " updated_at) VALUES (1, 'old', 'embedded', :spec, 'h', :t, :t)"),
            {"spec": spec, "t": STAMP})
        for index, (cell_id, settings) in enumerate(cells):
            conn.execute(text(
                "INSERT INTO cells (sweep_id, cell_id, cell_index, axes, settings, labels,"
                " state, attempts_count, max_retries, created_at) VALUES (1, :id, :i, :axes,"
                " :settings, '{}', :state, :attempts, 0, :t)"),
                {"id": cell_id, "i": index, "axes": json.dumps(settings),
                 "settings": json.dumps(settings), "state": state,
                 "attempts": 0 if state == "pending" else 1, "t": STAMP})
    if upgrade:
        upgrade_schema(engine)
    engine.dispose()
