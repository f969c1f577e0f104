"""Row lookups and value checks shared by the registry's methods (inside a session)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from sqlalchemy import CursorResult, Update, select
from sqlalchemy.orm import Session

from orchestrator.errors import Problem, UserInputError, unknown_name
from orchestrator.registry.models import CellRow, SweepRow


def jsonable(value: Any, what: str) -> Any:
    """A JSON-clean copy (pydantic models dumped, tuples to lists); TypeError if impossible."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} is not JSON-serialisable: {exc}") from None


def check_fields(fields: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    """TypeError naming the fields that are not in ``allowed``."""
    extra = sorted(set(fields) - allowed)
    if extra:
        raise TypeError(f"{what} got unknown field(s) {extra}; allowed: {sorted(allowed)}")


def updated_one(session: Session, statement: Update) -> bool:
    """Run a bulk UPDATE (loaded rows are not synchronised); whether it changed exactly
    one row: the answer of a compare-and-set."""
    result = cast(CursorResult[Any], session.execute(
        statement.execution_options(synchronize_session=False)))
    return result.rowcount == 1


def sweep_row(session: Session, name: str, lock: bool = False) -> SweepRow:
    """The sweep's row (locked FOR UPDATE if asked); unknown names list the known ones."""
    query = select(SweepRow).where(SweepRow.name == name)
    row = session.scalar(query.with_for_update() if lock else query)
    if row is None:
        known = session.scalars(select(SweepRow.name)).all()
        raise unknown_name("sweep", name, known, location="sweep")
    return row


def cell_row(session: Session, sweep: str, ref: str, prefix: bool = False) -> CellRow:
    """The cell ``ref`` of ``sweep`` (or the only one whose id starts with it, if
    ``prefix``); otherwise a UserInputError."""
    parent = sweep_row(session, sweep)
    in_sweep = select(CellRow).where(CellRow.sweep_id == parent.id)
    row = session.scalar(in_sweep.where(CellRow.cell_id == ref))
    if row is not None:
        return row
    matches: list[CellRow] = []
    if prefix and ref and ref.isalnum():
        matches = list(session.scalars(
            in_sweep.where(CellRow.cell_id.startswith(ref)).order_by(CellRow.cell_id).limit(6)))
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UserInputError(f"cell prefix '{ref}' is ambiguous in sweep '{sweep}'", [Problem(
            "cell", "more than one cell id starts with it", found=ref,
            allowed=", ".join(m.cell_id for m in matches[:5]),
            fix="give more characters of the cell id")])
    raise UserInputError(f"no cell '{ref}' in sweep '{sweep}'", [Problem(
        "cell", "no cell id is or starts with it", found=ref,
        fix=f"`kappa status {sweep}` lists the sweep's cells")])
