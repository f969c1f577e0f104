"""Experiment specs: YAML -> a strict, frozen :class:`Spec` (docs/spec.md#python-api), every
problem raised at once as a located ``UserInputError`` (the cells' problems are added by
:func:`orchestrator.grid.plan.load_plan`: what a submit uses)."""

from orchestrator.spec.loader import load_spec, parse_spec
from orchestrator.spec.model import JsonScalarValue, Resources, Spec, scalar_key, spec_json_schema

__all__ = ["JsonScalarValue", "Resources", "Spec", "load_spec", "parse_spec", "scalar_key",
           "spec_json_schema"]
