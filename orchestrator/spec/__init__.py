"""Experiment specs: YAML -> a strict, frozen :class:`Spec`.

Public API (stable; the scheduler and registry build on it):

* :func:`load_spec` ``(path) -> Spec`` and :func:`parse_spec` ``(text, filename) -> Spec``
  raise :class:`orchestrator.errors.UserInputError` with every problem the spec itself
  shows, located as ``file:line:column`` (:func:`orchestrator.grid.plan.load_plan` adds
  the cells' problems and makes the sweep's plan: what a submit uses).
* :class:`Spec` keeps ``source_text`` and ``path`` for the registry and MLflow artifacts.
* :func:`spec_json_schema` is the JSON Schema editors validate specs with.

Expanding a spec into cells is :func:`orchestrator.grid.expand`.
"""

from orchestrator.spec.loader import load_spec, parse_spec
from orchestrator.spec.model import JsonScalarValue, Resources, Spec, scalar_key
from orchestrator.spec.schema import spec_json_schema

__all__ = [
    "JsonScalarValue",
    "Resources",
    "Spec",
    "load_spec",
    "parse_spec",
    "scalar_key",
    "spec_json_schema",
]
