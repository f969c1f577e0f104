"""Bounded YAML input (docs/spec.md#limits): a file is read only up to a size, a document
measured before use. A 1 kB "billion laughs" document composes instantly (aliases share
nodes) and explodes only when walked as a tree, so :func:`check_graph` measures the
composed graph first: size with aliases expanded, depth, aliases to a node containing them."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import yaml

from orchestrator.errors import Problem, UserInputError
from orchestrator.limits import MAX_FILE_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES


def read_yaml_file(path: Path, what: str = "spec") -> str:
    """The text of a YAML file (at most :data:`MAX_FILE_BYTES`, a UTF-8 BOM dropped); an
    unreadable file is a ``UserInputError`` naming it (bad UTF-8 at its line and column)."""
    def refuse(message: str, found: str | None = None, fix: str | None = None,
               line: int | None = None, column: int | None = None) -> UserInputError:
        problem = Problem(location="", message=message, found=found, fix=fix, file=str(path),
                          line=line, column=column)
        return UserInputError(f"cannot read {what} {path}", [problem])

    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise refuse("this is a folder, not a file", fix=f"name the {what} file inside it")
        if not stat.S_ISREG(mode):
            raise _not_regular(refuse, mode, what)
        # Non-blocking: a FIFO put in the file's place since the check still opens at
        # once (a blocking open waits for a writer forever), and is refused below.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise _not_regular(refuse, mode, what)
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise refuse(exc.strerror or str(exc)) from None
    if len(raw) > MAX_FILE_BYTES:
        raise refuse(f"the file is larger than {MAX_FILE_BYTES // 1024:,} KiB",
                     fix=f"a {what} describes cells, it does not list data: use axes, "
                         "and keep data in files the settings name")
    try:
        return raw.decode("utf-8-sig")  # a BOM some editors write is not part of the text
    except UnicodeDecodeError as exc:
        raise refuse("not UTF-8 text", found=repr(raw[exc.start : exc.end]),
                     fix="save the file as UTF-8", line=raw.count(b"\n", 0, exc.start) + 1,
                     column=exc.start - raw.rfind(b"\n", 0, exc.start)) from None


def _not_regular(refuse: Callable[..., UserInputError], mode: int, what: str) -> UserInputError:
    """The refusal of a FIFO, socket or device: reading one can wait forever (a FIFO
    with no writer) or never end (``/dev/zero``), so nothing reads it."""
    kinds = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    kind = next((name for test, name in kinds if test(mode)), "not a regular file")
    return refuse(f"this is {kind}, not a regular file",
                  fix=f"save the {what} to a file and give that file's path "
                      "(e.g. `cat ... > spec.yaml`)")


def _dots(key: yaml.Node) -> int:
    """Levels a key adds beyond its own: ``model.d_model`` nests as deep as ``model: {d_model}``
    once settings are read, so each dot counts."""
    return key.value.count(".") if isinstance(key, yaml.ScalarNode) else 0


def _children(node: yaml.Node) -> Iterator[tuple[str | int, yaml.Node, int]]:
    """A node's children: the path part each sits under (a mapping key's own text), the
    child, and the extra levels its key's dots add."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            label = key.value if isinstance(key, yaml.ScalarNode) else "?"
            yield label, key, 0
            yield label, value, _dots(key)
    elif isinstance(node, yaml.SequenceNode):
        for index, child in enumerate(node.value):
            yield index, child, 0


def _where(path: list[str | int]) -> str:
    """The dotted location; a very deep one keeps its first levels and says how many."""
    text = ""
    for part in path[:12]:
        if isinstance(part, str) and len(part) > 60:
            part = part[:60] + "..."
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text + (f"... ({len(path)} levels)" if len(path) > 12 else "")


def _problem(filename: str, node: yaml.Node, path: list[str | int], message: str,
             fix: str, found: str | None = None) -> UserInputError:
    mark = node.start_mark
    return UserInputError(f"{filename}: YAML too large or recursive", [Problem(
        location=_where(path), message=message, found=found, fix=fix, file=filename,
        line=mark.line + 1, column=mark.column + 1)])


def _plain_and_small(root: yaml.Node) -> bool:
    """Whether the document is a tree (no alias) within the limits: the common case, in
    one quick pass (anything else is measured and located by :func:`check_graph`)."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    mapping, sequence = yaml.MappingNode, yaml.SequenceNode
    while stack:
        node, depth = stack.pop()
        if id(node) in seen or depth > MAX_YAML_DEPTH:
            return False
        seen.add(id(node))
        kind = type(node)
        if kind is mapping:
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1 + _dots(key)))
        elif kind is sequence:
            stack.extend((child, depth + 1) for child in node.value)
        if len(seen) + len(stack) > MAX_YAML_NODES:
            return False
    return True


def check_graph(root: yaml.Node, filename: str) -> None:
    """Refuse a composed document that is cyclic, too deep or too big once aliases expand.
    Iterative, and linear in the distinct nodes (an alias's target is measured once)."""
    if _plain_and_small(root):
        return
    expanded: dict[int, int] = {}  # id(node) -> size of its subtree, aliases expanded
    height: dict[int, int] = {}  # id(node) -> levels in and below it (dots included)
    on_path: set[int] = {id(root)}
    stack: list[tuple[yaml.Node, Iterator[tuple[str | int, yaml.Node, int]], int]] = [
        (root, _children(root), 1)]
    path: list[str | int] = []
    distinct = 1
    while stack:
        node, children, depth = stack[-1]
        if (step := next(children, None)) is not None:
            label, child, extra = step
            key = id(child)
            if key in on_path:
                anchor = child.start_mark
                raise _problem(
                    filename, node, [*path, label],
                    "a recursive alias: it refers to a node that contains it",
                    found=f"the anchor at line {anchor.line + 1}, column {anchor.column + 1}",
                    fix="an alias (*name) may only refer to a node outside itself")
            if key in expanded:  # shared by an alias: measured already
                if depth + extra + height[key] > MAX_YAML_DEPTH:
                    raise _too_deep(filename, child, [*path, label])
                continue
            distinct += 1
            if distinct > MAX_YAML_NODES:
                raise _problem(
                    filename, child, [*path, label],
                    f"the document has more than {MAX_YAML_NODES:,} values, keys and lists",
                    fix="a spec describes cells, it does not list data: use axes, and keep "
                    "data in files the settings name")
            if depth + 1 + extra > MAX_YAML_DEPTH:
                raise _too_deep(filename, child, [*path, label])
            on_path.add(key)
            stack.append((child, _children(child), depth + 1 + extra))
            path.append(label)
            continue
        stack.pop()
        on_path.discard(id(node))
        kids = [(child, extra) for _, child, extra in _children(node)]
        size = 1 + sum(expanded[id(child)] for child, _ in kids)
        if size > MAX_YAML_NODES:
            raise _problem(
                filename, node, path,
                f"aliases (*name) expand this to more than {MAX_YAML_NODES:,} values",
                fix="write the values out, or refer to fewer aliases of aliases")
        expanded[id(node)] = size
        height[id(node)] = 1 + max((extra + height[id(child)] for child, extra in kids),
                                   default=0)
        if path:
            path.pop()


def _too_deep(filename: str, node: yaml.Node, path: list[str | int]) -> UserInputError:
    return _problem(filename, node, path, f"nested more than {MAX_YAML_DEPTH} levels deep (a dot"
                    " in a key counts as a level)", fix="flatten it: a spec needs a few levels")
