"""YAML text -> plain Python data, keeping the node tree so that a dotted location
(``axes.kappa.k200.kl_coef``) becomes ``file:line:col``. Two YAML 1.1 surprises are fixed:
duplicate keys are errors (PyYAML keeps the last) and ``1e-3`` is a float (not a string)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import yaml

from orchestrator.errors import Problem, UserInputError
from orchestrator.limits import MAX_FILE_BYTES
from orchestrator.spec.yaml_limits import check_graph

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# YAML 1.2 floats: exponent without a dot (1e-3), which YAML 1.1 reads as a string.
_FLOAT_12 = re.compile(
    r"^[-+]?(?:[0-9][0-9_]*)?(?:\.[0-9_]*)?[eE][-+]?[0-9]+$|"
    r"^[-+]?(?:[0-9][0-9_]*)\.[0-9_]*$|^[-+]?\.[0-9_]+$|"
    r"^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"
)


class _Loader(_BaseLoader):  # type: ignore[misc,valid-type]
    """Safe loader with YAML 1.2 floats."""


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))


def float_or_word(value: float) -> float | str:
    """Infinities and NaN as the words ``inf``, ``-inf``, ``nan`` (how ``.inf`` is read): JSON
    has no such numbers, NaN equals nothing, and settings take the word (``clip_ratio: inf``)."""
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


# Dates are text: `2024-02-30` is a string, not a crash in the date constructor (no
# setting takes a date, and JSON has none).
for _first, _resolvers in _Loader.yaml_implicit_resolvers.items():
    _resolvers[:] = [(tag, rx) for tag, rx in _resolvers if tag != "tag:yaml.org,2002:timestamp"]


def _number(construct: Any) -> Any:
    """A number constructor whose failures are located YAML errors, not tracebacks (``0x_``,
    ``.e5`` and 4300-digit integers look like numbers to YAML but not to Python)."""
    def checked(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
        try:
            return construct(loader, node)
        except ValueError:
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value[:40]!r} is not a number kappa can read "
                "(quote it to make it text)", node.start_mark) from None

    return checked


def _unsupported(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    raise yaml.constructor.ConstructorError(
        None, None, f"tag {node.tag.replace('tag:yaml.org,2002:', '!!')} is not supported: "
        "specs hold text, numbers, booleans, null, lists and mappings", node.start_mark)


_Loader.add_constructor("tag:yaml.org,2002:int", _number(_Loader.construct_yaml_int))
_Loader.add_constructor("tag:yaml.org,2002:float", _number(
    lambda loader, node: float_or_word(loader.construct_yaml_float(node))))
for _tag in ("binary", "timestamp", "set", "omap", "pairs"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _unsupported)


class _Dumper(yaml.SafeDumper):
    """Dumps what :func:`load_yaml` reads back equal: text that its YAML 1.2 floats would
    read as a number (``'1e-3'``) is quoted; no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))
# Text holding a line break or control character is written double-quoted, as escapes
# (U+2028 as \L): every line of the dump is a line of YAML, for any reader of the file.
_Dumper.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    "tag:yaml.org,2002:str", text, style=None if text.isprintable() else '"'))


def dump_yaml(data: Any) -> str:
    """``data`` as YAML text that :func:`load_yaml` reads back equal."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                     default_flow_style=None, width=100)


@dataclass(frozen=True)
class Position:
    """A 1-based line/column in a source file."""

    line: int
    column: int

    @classmethod
    def of(cls, node: yaml.Node) -> Position:
        """Where ``node`` starts."""
        return cls(node.start_mark.line + 1, node.start_mark.column + 1)

    @classmethod
    def in_text(cls, text: str, index: int) -> Position:
        """Where ``text[index]`` is."""
        return cls(text.count("\n", 0, index) + 1, index - text.rfind("\n", 0, index))


def dotted(path: Sequence[str | int]) -> str:
    """``("axes", "seed", 2)`` -> ``"axes.seed[2]"``, as spec locations read."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


@dataclass(frozen=True)
class SourceDocument:
    """Parsed YAML plus the node tree, for locating any path in the original text."""

    data: Any
    root: yaml.Node | None
    filename: str
    # id(mapping node) -> its keys' text -> (key node, value node): locating a problem
    # costs a lookup per level, not a scan of the mapping (specs may have 10^4 problems).
    _keys: dict[int, dict[str, tuple[yaml.Node, yaml.Node]]] = field(
        default_factory=dict, repr=False, compare=False)

    def _entries(self, node: yaml.MappingNode) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        entries = self._keys.get(id(node))
        if entries is None:
            entries = {}
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    entries.setdefault(key_node.value, (key_node, value_node))
            self._keys[id(node)] = entries
        return entries

    def position(self, path: Sequence[str | int]) -> Position | None:
        """Where ``path`` (mapping keys / sequence indices) is, or its deepest known parent;
        a mapping entry is located at its key, dotted keys written as one are matched."""
        node = self.root
        if node is None:
            return None
        best = Position.of(node)
        parts = [str(p) for p in path]
        i = 0
        while i < len(parts):
            if isinstance(node, yaml.MappingNode):
                entries = self._entries(node)
                # Longest dotted join first: a key may itself contain dots.
                j = next((j for j in range(len(parts), i, -1)
                          if ".".join(parts[i:j]) in entries), None)
                if j is None:
                    return best
                key_node, node = entries[".".join(parts[i:j])]
                best, i = Position.of(key_node), j
            elif isinstance(node, yaml.SequenceNode):
                try:
                    node = node.value[int(parts[i])]
                except (ValueError, IndexError):
                    return best
                best, i = Position.of(node), i + 1
            else:
                return best
        return best

    def problem(self, path: Sequence[str | int], location: str, message: str,
                found: str | None = None, allowed: str | None = None,
                fix: str | None = None) -> Problem:
        """A :class:`Problem` located at ``path`` in this document."""
        pos = self.position(path)
        return Problem(location=location, message=message, found=found, allowed=allowed,
                       fix=fix, file=self.filename, line=pos.line if pos else None,
                       column=pos.column if pos else None)


# Key tags that are names: text, and YAML's merge key `<<` (anchors: `<<: *defaults`).
_NAME_TAGS = frozenset({"tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"})


def _key_problems(node: yaml.Node | None, path: tuple[str | int, ...], doc: SourceDocument,
                  out: list[Problem]) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            key = key_node.value
            at = Position.of(key_node)
            here = partial(Problem, location=dotted((*path, key)), file=doc.filename,
                           line=at.line, column=at.column)
            if key_node.tag not in _NAME_TAGS:
                # `1:`, `null:`, `yes:` (YAML 1.1 reads a boolean): no name a spec uses.
                out.append(here(message="a key must be a name (text), not a number, boolean "
                                "or null", found=key, fix=f"quote it: '{key}':"))
            if key in seen:
                first = seen[key].start_mark.line + 1
                out.append(here(message=f"duplicate key (first given on line {first})",
                                found=repr(key), fix="remove one of the two entries"))
            seen[key] = key_node
            _key_problems(value_node, (*path, key), doc, out)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _key_problems(item, (*path, index), doc, out)


def _reader_problem(exc: yaml.reader.ReaderError, text: str, filename: str) -> Problem:
    """A character YAML does not allow (a control character), at its line and column."""
    char = exc.character if isinstance(exc.character, int) else None
    # libyaml counts UTF-8 bytes; locate the first such character ourselves instead.
    index = next((i for i, c in enumerate(text) if ord(c) == char), None)
    at = Position.in_text(text, index) if index is not None else None
    return Problem(
        location="", message=f"{exc.reason}", file=filename,
        found=f"U+{char:04X}" if char is not None else None,
        line=at.line if at else None, column=at.column if at else None,
        fix="remove it, or write it escaped in a double-quoted string (\"\\t\")")


def load_yaml(text: str, filename: str) -> SourceDocument:
    """Parse one YAML document; syntax errors and duplicate keys raise ``UserInputError``."""
    if len(text) > MAX_FILE_BYTES:  # characters; files are refused on bytes before this
        raise UserInputError(f"{filename}: too large", [Problem(
            location="", message=f"more than {MAX_FILE_BYTES:,} characters", file=filename,
            fix="a spec describes cells, it does not list data: use axes")])
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates: text no file can hold
        at = Position.in_text(text, exc.start)
        raise UserInputError(f"{filename}: not valid text", [Problem(
            location="", message="not Unicode text (a lone surrogate)",
            found=repr(text[exc.start : exc.end]), file=filename, line=at.line,
            column=at.column, fix="remove the character")]) from None
    try:
        loader = _Loader(text)
        try:
            root = loader.get_single_node()
            if root is not None:
                check_graph(root, filename)  # before building: aliases expand from here on
            data = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = " ".join(part for part in (exc.context, exc.problem) if part)
        raise UserInputError(f"{filename}: not valid YAML", [Problem(
            location="", message=message or "YAML syntax error", file=filename,
            line=mark.line + 1 if mark else None, column=mark.column + 1 if mark else None,
            fix=None if isinstance(exc, yaml.constructor.ConstructorError)
            else "check indentation, colons and quotes around this position")]) from None
    except yaml.reader.ReaderError as exc:
        raise UserInputError(f"{filename}: not valid YAML",
                             [_reader_problem(exc, text, filename)]) from None
    except yaml.YAMLError as exc:
        raise UserInputError(f"{filename}: not valid YAML",
                             [Problem(location="", message=str(exc), file=filename)]) from None
    doc = SourceDocument(data=data, root=root, filename=filename)
    problems: list[Problem] = []
    _key_problems(root, (), doc, problems)
    if problems:
        raise UserInputError(f"{filename}: invalid keys", problems)
    return doc


def cli_value(text: str) -> Any:
    """A value typed on the command line as YAML reads it (``false`` -> False, ``0.2`` ->
    0.2, ``grpo`` -> 'grpo'); text YAML cannot read stays text."""
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, ValueError):  # ValueError: 2024-02-30, 0x_, 5000-digit ints
        return text
