"""A YAML file holding one block of a spec rather than a whole spec: a cell's settings
(``kappa train CONFIG``) or a ``stop:`` block (``kappa stop-check --rules FILE``), read as a
spec is read (:mod:`.yaml_limits`, :mod:`.yaml_source`), every problem located."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from orchestrator.errors import UserInputError
from orchestrator.limits import MAX_FILE_BYTES
from orchestrator.spec.loader import _problems
from orchestrator.spec.stop_block import StopRules
from orchestrator.spec.yaml_limits import read_yaml_file
from orchestrator.spec.yaml_source import SourceDocument, load_yaml

T = TypeVar("T")
RULES_FIX = "see docs/spec.md#stopping-rules"
FILE_FIX = (f"give --rules a regular YAML file (at most {MAX_FILE_BYTES // 1024:,} KiB) holding "
            "a stop: block, e.g. stop: {plateau: {metric: ..., patience: 15}}")


class _StopBlock(BaseModel):
    """A spec cut down to its ``stop:`` block: problems are located and named as a spec's."""

    stop: StopRules


def read_mapping(path: Path, what: str, noun: str, expected: str) -> SourceDocument:
    """The YAML file at ``path`` (``what`` names it in errors), which must hold a mapping
    of ``noun`` (``expected`` shows its form); an empty file is an empty mapping."""
    doc = load_yaml(read_yaml_file(path, what), str(path))
    if doc.data is None:
        return dataclasses.replace(doc, data={})
    if not isinstance(doc.data, dict):
        raise UserInputError(f"{path} must hold a mapping of {noun}", [doc.problem(
            (), "", f"expected a mapping ({expected})", found=type(doc.data).__name__)])
    return doc


def read_settings(path: Path, validate: Callable[[dict[str, Any]], T], what: str) -> T:
    """The flat mapping of settings in ``path``, checked by ``validate`` (a backend's);
    every problem at once, located."""
    doc = read_mapping(path, "config", "settings", "setting: value")
    try:
        return validate(doc.data)
    except UserInputError as exc:
        positions = [doc.position(p.location.split(".")) if p.location else None
                     for p in exc.problems]
        raise UserInputError(f"{path}: invalid {what}", [dataclasses.replace(
            p, file=doc.filename, line=at.line if at else None, column=at.column if at else None)
            for p, at in zip(exc.problems, positions, strict=True)]) from None


def read_stop_rules(path: Path) -> StopRules:
    """The stopping rules in ``path``: a spec's ``stop:`` block, or a file holding one
    (``stop:`` its only key). Its problems are located and named as a spec's would be."""
    try:
        doc = read_mapping(path, "stop rules", "stop rules",
                           "plateau:, threshold:, diverged:, together:, or one stop: block")
    except UserInputError as exc:  # the file as a whole: the fault is the option's
        raise UserInputError(exc.summary, [p if p.location else dataclasses.replace(
            p, location="--rules", fix=p.fix if p.line and p.fix else FILE_FIX)
            for p in exc.problems]) from None
    return _rules(doc if set(doc.data) == {"stop"} else _as_stop_block(doc), path)


def rules_file(path: Path) -> StopRules | None:
    """The stopping rules in ``path`` if it is a rules file rather than a spec: a YAML
    mapping whose one key is ``stop:`` (what ``--rules`` reads); ``None`` otherwise,
    unreadable files included, for reading as a spec, which reports their problems."""
    try:
        doc = read_mapping(path, "spec", "keys", "key: value")
    except UserInputError:
        return None
    return _rules(doc, path) if set(doc.data) == {"stop"} else None


def _rules(doc: SourceDocument, path: Path) -> StopRules:
    try:
        return _StopBlock.model_validate(doc.data).stop
    except ValidationError as exc:
        raise UserInputError(f"invalid rules in {path}", [
            dataclasses.replace(p, fix=p.fix or RULES_FIX) for p in _problems(exc, doc)]) from None


def _as_stop_block(doc: SourceDocument) -> SourceDocument:
    """``doc`` (a bare block) as the value of a ``stop:`` key at the block's own place."""
    root = doc.root
    if root is None:
        return SourceDocument({"stop": doc.data}, None, doc.filename)
    key = yaml.ScalarNode("tag:yaml.org,2002:str", "stop", root.start_mark, root.start_mark)
    return SourceDocument({"stop": doc.data}, yaml.MappingNode(
        "tag:yaml.org,2002:map", [(key, root)], root.start_mark, root.end_mark), doc.filename)
