"""Command-line overrides of a spec in Hydra's grammar (:data:`_GRAMMAR`), read by Hydra's
own parser (imported only when a command has overrides: it costs about half a second).

Overrides edit the YAML document before anything validates it, so the spec they make is exactly the
spec edited by hand: :func:`resolve` re-reads the YAML it dumps (the text the sweep stores; the
overrides themselves are kept as data, in the sweep's plan), and a problem at a key an override
wrote points at that override (``override 2: axes.seed: ...``).

What Hydra's parser cannot take in seconds (its time grows with the square of a list's length),
or at all (deep nesting, long dotted keys, integers of thousands of digits), is refused before it
parses: :func:`bounds_problems` (docs/spec.md#limits)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.errors import Problem, UserInputError
from orchestrator.limits import (
    MAX_NUMBER_DIGITS,
    MAX_OVERRIDE_CHARS,
    MAX_OVERRIDE_ITEMS,
    MAX_OVERRIDE_KEY_PARTS,
    MAX_OVERRIDE_NESTING,
    MAX_OVERRIDES,
    MAX_OVERRIDES_CHARS,
    MAX_PROBLEMS,
    more_problems,
)
from orchestrator.redact import one_line
from orchestrator.spec.settings_paths import did_you_mean
from orchestrator.spec.yaml_source import (
    SourceDocument,
    dotted,
    dump_yaml,
    float_or_word,
    load_yaml,
)

Op = Literal["set", "add", "force", "delete"]
_OPS: dict[str, Op] = {"CHANGE": "set", "ADD": "add", "FORCE_ADD": "force", "DEL": "delete"}
_GRAMMAR = ("key=value (change), +key=value (add), ++key=value (set either way), ~key or "
            "~key=value (delete); lists [a,b], mappings {k: v}, 'quoted text'")
_TOP_KEYS = ("name", "description", "backend", "base", "axes", "labels", "order", "zip",
             "exclude", "include", "resources", "retries", "stop", "search")


@dataclass(frozen=True)
class Override:
    """One override as given (``text``, the ``number``-th on the command line) and read."""

    number: int
    text: str
    op: Op
    key: str
    value: Any = None
    has_value: bool = True

    def problem(self, message: str, *, key: str | None = None, found: str | None = None,
                allowed: str | None = None, fix: str | None = None) -> Problem:
        """A problem located at this override (and at ``key`` in it, default its own)."""
        at = self.key if key is None else key
        where = f"override {self.number}"
        return Problem(location=f"{where}: {at}" if at else where, message=message,
                       found=found, allowed=allowed, fix=fix)


def _shell_word(text: str) -> str:
    """``text`` quoted for a POSIX shell, readably: ``"b='x y'"`` rather than shlex's
    ``'b='"'"'x y'"'"''`` where double quotes can do it."""
    quoted = shlex.quote(text)
    if quoted.startswith("'") and "'" in text and not any(c in text for c in '"$`\\!'):
        return f'"{text}"'
    return quoted


def command_line(texts: Sequence[str]) -> str:
    """The overrides as one shell-quoted line (``base.max_steps=20 'axes.seed=[0,1]'``), for
    display: a line break or control character in one shows as its escape."""
    return one_line(" ".join(_shell_word(t) for t in texts))


def _plain(value: Any) -> Any:
    """A copy sharing nothing (an override of one alias does not change the other), non-finite
    floats as the words ``inf``/``-inf``/``nan`` (as :func:`~.yaml_source.load_yaml` reads);
    a ``TypeError`` naming anything else Hydra makes (a ``range(...)`` inside a list)."""
    if isinstance(value, float):
        return float_or_word(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, str | int):
        return value
    raise TypeError(type(value).__name__)


def _read_one(parser: Any, number: int, text: str) -> Override | Problem:
    """``text`` read by Hydra's parser: the override, or its problem (at ``override <number>``)."""
    from hydra.errors import HydraException

    where = f"override {number}"
    try:
        parsed = parser.parse_override(text)
    except (HydraException, ValueError) as exc:  # ValueError: a number Python cannot read
        bare = "=" not in text and not text.startswith("~")
        return Problem(location=where, message=f"not an override: {str(exc).strip()}",
                       found=repr(text), allowed=_GRAMMAR,
                       fix="an override is key=value (one spec per command)" if bare else
                       "quote a value with spaces, commas or brackets: key='a b' (and the "
                       "whole override for the shell: 'key=[0, 1]')")
    key = parsed.key_or_group
    if parsed.package is not None or "/" in key:
        return Problem(location=where, message="config groups and @packages are Hydra's; "
                       "a spec has neither", found=repr(text),
                       fix="address the key by its dotted path: base.max_steps=20")
    if not key:
        return Problem(location=where, message="no key", found=repr(text), allowed=_GRAMMAR)
    if parsed.is_sweep_override():
        return Problem(location=f"{where}: {key}", message="a, b (or range, glob, interval) "
                       "is a Hydra multirun sweep; a spec's axes do that", found=repr(text),
                       fix=f"give a list: '{key}=[...]' (an axis), or quote a value with a "
                       "comma: key='a,b'")
    has_value = parsed.value_type is not None
    try:
        value = _plain(parsed.value()) if has_value else None
    except (HydraException, ValueError, TypeError) as exc:
        return Problem(location=f"{where}: {key}", message="not a value: a Hydra sweep "
                       f"(range, choice, glob, interval) inside it ({exc})", found=repr(text),
                       allowed="text, numbers, true/false, null, [lists] and {mappings}",
                       fix="list the values themselves: 'axes.seed=[0,1,2]'")
    return Override(number=number, text=text, op=_OPS[parsed.type.name], key=key,
                    value=value, has_value=has_value)


def _short(value: Any) -> str:
    return json.dumps(value)[:200]


def _step(container: Any, parts: list[str], i: int) -> tuple[Any, int] | None:
    """The key (or list index) at ``parts[i:]`` in ``container``, and the parts it takes:
    the longest dotted join that is a key (a key may hold dots: ``model.d_model``)."""
    if isinstance(container, dict):
        j = next((j for j in range(len(parts), i, -1) if ".".join(parts[i:j]) in container), None)
        return None if j is None else (".".join(parts[i:j]), j)
    index = parts[i]
    if (isinstance(container, list) and index.isascii() and index.isdigit()
            and int(index) < len(container)):
        return int(index), i + 1
    return None


def _apply(data: dict[str, Any], ov: Override) -> tuple[str | int, ...] | Problem:
    """Apply ``ov`` to ``data`` in place; the path it wrote, or the problem."""
    parts = ov.key.split(".")
    container: Any = data
    path: list[str | int] = []
    i = 0
    while (step := _step(container, parts, i)) is not None:
        key, j = step
        if j == len(parts):
            return _at_existing(container, key, (*path, key), ov)
        if not isinstance(container[key], dict | list):
            return ov.problem(f"{dotted([*path, key])} is a value, not a mapping",
                              found=_short(container[key]),
                              fix=f"set {dotted([*path, key])} itself")
        container, path, i = container[key], [*path, key], j
    here = dotted(path)
    rest = parts[i:]
    if isinstance(container, list):
        if ov.op in ("add", "force") and rest == [str(len(container))]:
            container.append(ov.value)  # +exclude.1=...: one more item
            return (*path, len(container) - 1)
        return ov.problem(f"{here} is a list of {len(container)}: address an item by its "
                          f"index from 0 ({here}.0; +{here}.{len(container)}=... appends "
                          "one), or set the whole list", found=repr(rest[0]))
    if ov.op in ("set", "delete"):
        # Adding is allowed, so a key the spec could have is a candidate; deleting is not.
        known = {str(k) for k in container} | (
            set(_TOP_KEYS) if not path and ov.op == "set" else set())
        known -= {rest[0], ".".join(rest)}
        spelled_right = not path and rest[0] in _TOP_KEYS  # absent, not misspelled
        hint = None if spelled_right else (
            did_you_mean(".".join(rest), known) or did_you_mean(rest[0], known))
        if ov.op == "set":  # the closest real key first: a typo is likelier than a new key
            fix = (f"{hint} (or, to add {rest[-1]}, write +{ov.text})" if hint
                   else f"to add it, write +{ov.text}")
        else:
            fix = hint or "leave this override out: there is nothing to delete"
        return ov.problem(
            f"the spec has no {'.'.join(rest)}" + (f" under {here}" if here else ""),
            allowed=None if ov.op == "set" else ", ".join(str(k) for k in container) or None,
            fix=fix)
    if path == ["axes"]:
        rest = [".".join(rest)]  # an axis name is one key, dots and all (model.d_model)
    for part in rest[:-1]:
        container[part] = {}
        container, path = container[part], [*path, part]
    container[rest[-1]] = ov.value
    return (*path, rest[-1])


def _at_existing(container: Any, key: str | int, path: tuple[str | int, ...],
                 ov: Override) -> tuple[str | int, ...] | Problem:
    current = container[key]
    if ov.op == "add":
        return ov.problem("already in the spec", found=_short(current),
                          fix=f"to change it, write {ov.text[1:]} (or ++{ov.text[1:]})")
    if ov.op == "delete":
        # Compared as YAML values: true is not 1.
        if ov.has_value and json.dumps(current, sort_keys=True) != json.dumps(
                ov.value, sort_keys=True):
            return ov.problem(f"holds {_short(current)}, not {_short(ov.value)}, so it is "
                              "not deleted", found=_short(current),
                              fix=f"~{ov.key} deletes it whatever it holds")
        del container[key]
        return path
    container[key] = ov.value
    return path


def _flat(path: Sequence[str | int]) -> tuple[str, ...]:
    return tuple(piece for part in path for piece in str(part).split("."))


@dataclass(frozen=True)
class OverriddenDocument(SourceDocument):
    """The spec's document after overrides: keys an override wrote are located at that
    override, every other key in the file as before."""

    written: tuple[tuple[tuple[str, ...], Override], ...] = ()

    def problem(self, path: Sequence[str | int], location: str, message: str,
                found: str | None = None, allowed: str | None = None,
                fix: str | None = None) -> Problem:
        flat = _flat(path)
        for at, ov in reversed(self.written):
            if flat[: len(at)] == at:
                return ov.problem(message, key=location, found=found, allowed=allowed,
                                  fix=fix)
        return super().problem(path, location, message, found, allowed, fix)


def resolve(doc: SourceDocument, texts: Sequence[str]) -> tuple[OverriddenDocument, str]:
    """``doc`` (a mapping) with the overrides ``texts`` applied in order, and its YAML text
    (what the sweep stores); every override that cannot apply in one ``UserInputError``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if too_large := bounds_problems(texts):  # before Hydra's parser
        raise UserInputError(f"{doc.filename}: overrides too large", too_large)
    parser = OverridesParser.create()
    data = _plain(doc.data)
    written: list[tuple[tuple[str, ...], Override]] = []
    problems: list[Problem] = []
    for n, text in enumerate(texts, 1):  # the good ones applied, to report all at once
        ov = _read_one(parser, n, text)
        if isinstance(ov, Problem):
            problems.append(ov)
            continue
        done = _apply(data, ov)
        if isinstance(done, Problem):
            problems.append(done)
        else:
            written.append((_flat(done), ov))
    if problems:
        shown = problems[:MAX_PROBLEMS] + ([more_problems(len(problems) - MAX_PROBLEMS)]
                                           if len(problems) > MAX_PROBLEMS else [])
        raise UserInputError(f"{doc.filename}: invalid overrides", shown)
    # The overrides are data (the sweep's plan keeps them), never spliced into this text:
    # a line break YAML knows (U+2028, NEL) in one would end the comment and turn the
    # rest into spec keys. The file name is escaped for the comment for the same reason.
    text = (f"# {one_line(doc.filename)} as resolved with command-line overrides "
            "(`kappa status SWEEP` lists them)\n" + dump_yaml(data))
    reread = load_yaml(text, f"{doc.filename} (with overrides)").data
    return OverriddenDocument(data=reread, root=doc.root, filename=doc.filename,
                              written=tuple(written)), text


def _measure(text: str) -> tuple[int, int, int]:
    """``text`` outside its quotes: its commas (the items of its lists and mappings beyond the
    first of each), the most lists, mappings and calls open at once, and the longest run of
    digits (underscores between them included)."""
    items = depth = nesting = run = digits = 0
    quote: str | None = None
    escaped = False
    for c in text:
        if quote is not None:  # Hydra's quoted text: a backslash escapes the next character
            if c == quote and not escaped:
                quote = None
            escaped = not escaped and c == "\\"
            continue
        if c.isdigit() or (c == "_" and run):
            run += 1
            digits = max(digits, run)
            continue
        run = 0
        if c in "'\"":
            quote = c
        elif c in "[{(":
            depth += 1
            nesting = max(nesting, depth)
        elif c in "]})":
            depth -= 1
        elif c == ",":
            items += 1
    return items, nesting, digits


def bounds_problems(texts: Sequence[str]) -> list[Problem]:
    """Why ``texts`` (the overrides, in order) are too large to parse: each override's
    bounds, then those of all of them together (empty: within every bound)."""
    def too(where: str, found: str, limit: int, unit: str = "") -> Problem:
        return Problem(where, f"{found}, more than the limit of {limit:,}{unit}",
                       allowed=f"at most {limit:,}", fix="put large or deep values in the "
                       "spec file, which has its own limits (docs/spec.md#limits)")

    if len(texts) > MAX_OVERRIDES:
        return [too("overrides", f"{len(texts):,} overrides", MAX_OVERRIDES)]
    problems: list[Problem] = []
    items = 0
    for n, text in enumerate(texts, 1):
        where = f"override {n}"
        if len(text) > MAX_OVERRIDE_CHARS:
            problems.append(too(where, f"{len(text):,} characters", MAX_OVERRIDE_CHARS,
                                " per override"))
            continue
        parts = text.lstrip("+~").split("=", 1)[0].count(".") + 1
        if parts > MAX_OVERRIDE_KEY_PARTS:
            problems.append(too(where, f"a key of {parts:,} dotted parts",
                                MAX_OVERRIDE_KEY_PARTS))
        commas, nesting, digits = _measure(text)
        items += commas
        if commas > MAX_OVERRIDE_ITEMS:
            problems.append(too(where, f"{commas:,} list and mapping items (counted by "
                                "their commas)", MAX_OVERRIDE_ITEMS))
        if nesting > MAX_OVERRIDE_NESTING:
            problems.append(too(where, f"lists and mappings nested {nesting:,} deep",
                                MAX_OVERRIDE_NESTING))
        if digits > MAX_NUMBER_DIGITS:
            problems.append(too(where, f"a number of {digits:,} digits", MAX_NUMBER_DIGITS))
    if problems:  # the bounds of all together only when no override passes one alone
        return problems
    if (total := sum(len(t) for t in texts)) > MAX_OVERRIDES_CHARS:
        problems.append(too("overrides", f"{total:,} characters in all", MAX_OVERRIDES_CHARS))
    if items > MAX_OVERRIDE_ITEMS:
        problems.append(too("overrides", f"{items:,} list and mapping items in all (counted "
                            "by their commas)", MAX_OVERRIDE_ITEMS))
    return problems
