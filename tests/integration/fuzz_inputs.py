"""Hypothesis strategies for hostile specs and cell configs (used by test_fuzz_inputs.py).

Three families: *structured* specs (the right keys with plausible, wrong-typed, unknown
and out-of-range values, rendered as block, flow or JSON YAML, sometimes with shared or
self-referencing anchors, sometimes mutated as text), *hostile* texts (alias bombs,
recursive aliases, deep nesting, huge documents, huge grids, huge numbers, thousands of
problems) and raw *bytes* (other encodings, broken UTF-8, control characters).
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import strategies as st

from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.backends.verl.settings import VerlSettings
from orchestrator.spec.model import Spec
from orchestrator.spec.settings_paths import settings_paths

SETTING_NAMES = sorted(settings_paths(EmbeddedSettings) | settings_paths(VerlSettings))
SPEC_KEYS = sorted(Spec.model_fields)
BIG = [2**31 - 1, 2**31, 2**32, 2**63, 10**7, 10**7 + 1, 4096, 4097, 10**30, -1, -(2**63)]
WORDS = ["grpo", "drgrpo", "gspo", "dapo", "clip_cov", "kl_cov", "arithmetic", "inf", "nan",
         "-inf", "token-mean", "verifier", "random", "none", "entropy_loss", "auto", "cpu",
         "k1", "low_var_kl", "embedded", "verl", "x", "", "yes", "null", "~", "1e-3", "1:30",
         "2024-02-30", "0x_", ".e5"]

numbers = st.one_of(
    st.integers(-3, 64), st.sampled_from(BIG), st.floats(0, 2),
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**80), 2**80))
text = st.text(max_size=12)
scalars = st.one_of(st.none(), st.booleans(), numbers, st.sampled_from(WORDS), text)
keys = st.one_of(st.sampled_from(SETTING_NAMES), st.sampled_from(SPEC_KEYS), text)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=8)


def sometimes_wrong(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``strategy`` three times in four, else any value (a wrong type, most likely)."""
    return st.one_of(strategy, strategy, strategy, values)


setting_names = st.one_of(st.sampled_from(SETTING_NAMES), st.sampled_from(SETTING_NAMES), keys)
settings_blocks = st.dictionaries(setting_names, sometimes_wrong(scalars), max_size=5)
axis_names = st.one_of(
    st.sampled_from(["seed", "group_size", "baseline", "clip_ratio", "kl_coef", "max_steps",
                     "model.d_model", "model.n_heads", "tag", "variant"]),
    st.sampled_from(SETTING_NAMES), text)


@st.composite
def structured_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A spec as data: mostly the right shape, with wrong parts here and there."""
    spec: dict[str, Any] = {}
    if draw(st.integers(0, 9)):
        spec["name"] = draw(st.one_of(st.sampled_from(["fuzz", "x-1", "Bad Name"]), text))
    if draw(st.booleans()):
        spec["backend"] = draw(sometimes_wrong(st.sampled_from(["embedded", "verl", "nope"])))
    if draw(st.booleans()):
        spec["base"] = draw(sometimes_wrong(settings_blocks))
    axes: dict[Any, Any] = draw(st.dictionaries(axis_names, sometimes_wrong(st.one_of(
        st.lists(scalars, max_size=4),
        st.dictionaries(text, settings_blocks, max_size=3))), max_size=4))
    if axes or draw(st.booleans()):
        spec["axes"] = axes
    names = [a for a in axes if isinstance(a, str)] or ["seed"]
    pick = st.sampled_from(names)
    if draw(st.integers(0, 3)) == 0:
        spec["labels"] = draw(sometimes_wrong(st.lists(st.one_of(pick, text), max_size=3)))
    if draw(st.integers(0, 3)) == 0:
        spec["zip"] = draw(sometimes_wrong(st.lists(st.lists(pick, max_size=3), max_size=2)))
    for section in ("exclude", "include"):
        if draw(st.integers(0, 3)) == 0:
            spec[section] = draw(sometimes_wrong(st.lists(
                st.dictionaries(pick, scalars, max_size=len(names) + 1), max_size=3)))
    if draw(st.integers(0, 2)) == 0:
        spec["resources"] = draw(sometimes_wrong(st.dictionaries(
            st.sampled_from(["gpus", "nodes", "hours", "cpus", "memory"]),
            st.one_of(numbers, st.booleans(), st.sampled_from(["2", "inf"])), max_size=4)))
    if draw(st.integers(0, 2)) == 0:
        spec["retries"] = draw(st.one_of(numbers, st.booleans(), values))
    if draw(st.integers(0, 5)) == 0:
        spec[draw(keys)] = draw(values)  # an unknown (or repeated) top-level key
    if draw(st.integers(0, 5)) == 0 and isinstance(spec.get("base"), dict):
        # Shared or self-referencing structures: the YAML gets anchors and aliases.
        spec["base"][draw(text)] = spec["base"] if draw(st.booleans()) else dict(spec["base"])
        if axes:
            spec["description"] = spec["base"]
    return spec


# Values each setting accepts (so that clean specs expand into cells).
GOOD: dict[str, st.SearchStrategy[Any]] = {
    "seed": st.integers(0, 20),
    "group_size": st.sampled_from([2, 4, 8]),
    "prompts_per_step": st.sampled_from([8, 16, 32]),
    "max_steps": st.integers(1, 500),
    "baseline": st.sampled_from(["grpo", "drgrpo", "gspo", "dapo", "clip_cov", "kl_cov"]),
    "reward_budget": st.booleans(),
    "clip_ratio": st.one_of(st.floats(0.05, 0.5), st.just("inf")),
    "kl_coef": st.floats(0, 0.1),
    "temperature": st.floats(0.5, 1.5),
    "learning_rate": st.floats(1e-6, 1e-3),
    "model.n_layers": st.integers(1, 4),
    "warm_start.steps": st.integers(0, 50),
    "entropy_intervention": st.sampled_from(["none", "entropy_loss", "entropy_reward"]),
    "val_every": st.integers(1, 50),
}
good_names = st.sampled_from(sorted(GOOD))


@st.composite
def good_blocks(draw: st.DrawFn, names: list[str] | None = None) -> dict[str, Any]:
    chosen = draw(st.lists(st.sampled_from(names or sorted(GOOD)), max_size=4, unique=True))
    return {name: draw(GOOD[name]) for name in chosen}


@st.composite
def clean_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A spec that expands (unless two values collide): settings with working values."""
    axis_settings = draw(st.lists(good_names, max_size=3, unique=True))
    base_names = [n for n in sorted(GOOD) if n not in axis_settings]
    spec: dict[str, Any] = {"name": draw(st.sampled_from(["fuzz", "toy.1", "a-b_c"]))}
    if draw(st.booleans()):
        spec["base"] = draw(good_blocks(base_names))
    axes: dict[str, Any] = {
        name: draw(st.lists(GOOD[name], min_size=1, max_size=3, unique=True))
        for name in axis_settings}
    if draw(st.booleans()):
        axes["tag"] = draw(st.lists(st.one_of(st.text(max_size=5), st.integers(0, 9)),
                                    min_size=1, max_size=3, unique=True))
        spec["labels"] = ["tag"]
    free = [n for n in base_names if n not in spec.get("base", {})]
    if draw(st.booleans()) and free:
        axes["variant"] = draw(st.dictionaries(st.sampled_from(["a", "b", "c", "ü"]),
                                               good_blocks(free), min_size=1, max_size=3))
    spec["axes"] = axes
    lists = [a for a, v in axes.items() if isinstance(v, list)]
    if len(lists) >= 2 and len(axes[lists[0]]) == len(axes[lists[1]]) and draw(st.booleans()):
        spec["zip"] = [lists[:2]]
    first = next(iter(axes), None)
    if first is not None and len(axes[first]) > 1 and draw(st.integers(0, 2)) == 0:
        spec["exclude"] = [{first: next(iter(axes[first]))}]
    if axes and draw(st.integers(0, 3)) == 0:
        spec["include"] = [{a: next(iter(v)) for a, v in axes.items()}]
    if draw(st.booleans()):
        spec["resources"] = {"gpus": draw(st.integers(0, 8)), "hours": draw(st.floats(0.1, 48))}
    if draw(st.booleans()):
        spec["retries"] = draw(st.integers(0, 3))
    return spec


@st.composite
def corrupted(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with one part replaced by any value, removed, or an unknown key added."""
    node: Any = spec
    while isinstance(node, dict) and node and draw(st.booleans()):
        child = node[draw(st.sampled_from(sorted(node, key=str)))]
        if not isinstance(child, dict) or not child:
            break
        node = child
    if not isinstance(node, dict):
        return spec
    action = draw(st.integers(0, 2))
    if action == 0 and node:
        node[draw(st.sampled_from(sorted(node, key=str)))] = draw(values)
    elif action == 1 and node:
        del node[draw(st.sampled_from(sorted(node, key=str)))]
    else:
        node[draw(keys)] = draw(values)
    return spec


MUTATIONS = ["\t", ":", "- ", "[", "{", "]", "}", "&a ", "*a", "*nope", "!!binary ",
             "!!python/name:os.system ", "<<: *a\n", "\x00", "\ufeff", "\x85", "\u2028",
             "? ", "'", '"', "%YAML 1.1\n", "---\n", "...\n", "#", "|", ">", "\\", "\n  ",
             "9" * 5000, "&a [*a]", "!!set ", "!!timestamp ", "0b_", "@", "`", "\r"]


@st.composite
def mutated(draw: st.DrawFn, base: str) -> str:
    """``base`` unchanged half of the time, else cut or with a token inserted or a line
    repeated or dropped."""
    kind = draw(st.integers(0, 7))
    if kind <= 3 or not base:
        return base
    at = draw(st.integers(0, len(base)))
    if kind == 4:
        return base[:at]
    if kind == 5:
        lines = base.splitlines(keepends=True)
        i = draw(st.integers(0, len(lines) - 1))
        return "".join(lines[: i + 1] + lines[i:]) if draw(st.booleans()) else "".join(
            lines[:i] + lines[i + 1:])
    tokens = draw(st.lists(st.one_of(st.sampled_from(MUTATIONS), text), min_size=1, max_size=3))
    for token in tokens:
        base = base[:at] + token + base[at:]
    return base


def render(data: Any, style: int, unicode: bool) -> str:
    """``data`` as YAML: block style, flow style, or JSON-like (one line)."""
    try:
        return yaml.safe_dump(data, default_flow_style=[False, True, None][style % 3],
                              allow_unicode=unicode, sort_keys=False,
                              width=10**6 if style == 2 else 80)
    except yaml.YAMLError:  # a value the dumper refuses: no such spec can be written
        return "name: unrenderable\n"


@st.composite
def spec_texts(draw: st.DrawFn) -> str:
    """A structured spec rendered as YAML, then perhaps mutated as text."""
    kind = draw(st.integers(0, 3))
    if kind == 0:
        data = draw(clean_specs())
    elif kind == 1:
        data = draw(corrupted(draw(clean_specs())))
    else:
        data = draw(structured_specs())
    return draw(mutated(render(data, draw(st.integers(0, 2)), draw(st.booleans()))))


@st.composite
def config_texts(draw: st.DrawFn) -> str:
    """A ``kappa train`` config: a flat (or dotted) mapping of embedded settings."""
    data = draw(st.one_of(
        st.dictionaries(st.sampled_from(sorted(settings_paths(EmbeddedSettings))),
                        sometimes_wrong(scalars), max_size=6),
        values))
    return draw(mutated(render(data, draw(st.integers(0, 2)), draw(st.booleans()))))


# --- hostile texts -----------------------------------------------------------------------


def bomb(levels: int, width: int, where: str) -> str:
    """A "billion laughs" of ``width ** levels`` strings under ``where``."""
    lines = [f"  l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    body = "\n".join(lines)
    if where == "axes":  # the last level used as an axis's values
        return f"name: x\ndescription:\n{body}\naxes:\n  seed: *l{levels - 1}\n"
    return f"name: x\n{where}:\n{body}\n"


RECURSIVE = [
    "name: x\nbase: &a {seed: 1, again: *a}\n",
    "name: x\naxes:\n  seed: &a [1, *a]\n",
    "name: x\nbase: &a\n  seed: 1\n  <<: *a\n",
    "name: x\ndescription: &a [[[*a]]]\n",
    "&a {name: x, base: *a}\n",
    "&a [*a]\n",
]


@st.composite
def hostile_texts(draw: st.DrawFn) -> str:
    """Inputs built to exhaust something: memory, time, recursion, the registry's ints."""
    kind = draw(st.integers(0, 11))
    if kind == 0:
        return bomb(draw(st.integers(2, 12)), draw(st.integers(2, 12)),
                    draw(st.sampled_from(["description", "base", "axes", "resources"])))
    if kind == 1:
        return draw(st.sampled_from(RECURSIVE))
    if kind == 2:  # flow nesting (libyaml stops at 1000 levels; kappa at 64)
        n = draw(st.sampled_from([10, 63, 64, 65, 200, 999, 1001, 5000]))
        return "name: x\nbase:\n  seed: " + "[" * n + "1" + "]" * n + "\n"
    if kind == 3:  # block nesting, or dots in keys
        n = draw(st.sampled_from([10, 62, 63, 64, 65, 300]))
        if draw(st.booleans()):
            return "name: x\nbase:\n  ? " + ".".join(["model"] * n) + "\n  : 1\n"
        return "name: x\nbase:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(n)) + \
            "  " * (n + 1) + "v: 1\n"
    if kind == 4:  # many keys: in base, at the top level or as axes
        n = draw(st.sampled_from([100, 5_000, 49_999, 50_001, 120_000]))
        where = draw(st.sampled_from(["base:\n  ", "", "axes:\n  "]))
        value = "[0]" if where.startswith("axes") else "0"
        head = "name: x\n" + where.split("\n")[0] + ("\n" if where else "")
        return head + "".join(f"{'  ' if where else ''}k{i}: {value}\n" for i in range(n))
    if kind == 5:  # long scalars and keys
        n = draw(st.sampled_from([1_000, 100_000, 900_000, 2_000_000]))
        return "name: x\ndescription: " + "a" * n + "\n" if draw(st.booleans()) else \
            "name: x\nbase:\n  ? " + "k" * n + "\n  : 1\n"
    if kind == 6:  # grids far past the limit, counted before they are made
        lengths = draw(st.lists(st.integers(1, 40), min_size=1, max_size=12))
        axes = "".join(f"  l{i}: {list(range(n))}\n" for i, n in enumerate(lengths))
        labels = ", ".join(f"l{i}" for i in range(len(lengths)))
        return f"name: x\nlabels: [{labels}]\naxes:\n{axes}"
    if kind == 7:  # numbers past every bound, and booleans where numbers go
        field = draw(st.sampled_from(
            ["retries", "resources: {gpus", "resources: {nodes", "resources: {hours",
             "resources: {cpus", "base: {max_steps", "base: {seed", "base: {group_size",
             "base: {prompts_per_step", "base: {warm_start.steps", "base: {val_size",
             "base: {model.d_model", "base: {checkpoint_every", "base: {intervention_steps"]))
        value = draw(st.one_of(
            st.sampled_from(["true", "no", "1e400", "-1", ".inf", ".nan", "'7'", "7.5"]),
            st.integers(0, 5000).map(lambda d: "9" * d or "0")))
        return f"name: x\n{field}: {value}" + ("}" if "{" in field else "") + "\n"
    if kind == 8:  # thousands of problems of one kind
        n = draw(st.sampled_from([200, 5_000, 40_000]))
        return "name: x\naxes:\n  seed: [" + ", ".join(f"s{i}" for i in range(n)) + "]\n"
    if kind == 9:  # many exclusions, includes or variants
        n = draw(st.sampled_from([100, 3_000, 15_000]))
        section = draw(st.sampled_from(["exclude", "include", "variants"]))
        if section == "variants":
            return "name: x\naxes:\n  v:\n" + "".join(
                f"    v{i}: {{seed: {i}, unknown{i % 7}: 1}}\n" for i in range(n))
        head = "name: x\naxes:\n  seed: [" + ", ".join(str(i) for i in range(50)) + "]\n"
        head += "  group_size: [2, 3, 4, 5, 6, 7, 8, 9]\n"
        return head + f"{section}:\n" + "".join(
            f"  - {{seed: {i % 60}, group_size: {2 + i % 9}}}\n" for i in range(n))
    if kind == 10:  # control characters and odd line ends in every place
        char = draw(st.sampled_from(["\x00", "\x01", "\x1b", "\x7f", "\x85", "\u2028",
                                     "\ufeff", "\ufffe", "\r", "\t", "\ud800"]))
        at = draw(st.sampled_from(["name: x", "description: a", "base: {seed: 1}"]))
        return f"name: x\n{at[: len(at) // 2]}{char}{at[len(at) // 2:]}\n"
    # Several documents, directives, a lone tag, an empty stream.
    return draw(st.sampled_from(["", "---\n", "---\n...\n", "name: x\n---\nname: y\n",
                                 "%YAML 1.2\n---\nname: x\n", "!!map\n", "!foo x\n", "[]\n",
                                 "name: x\n--- !!str\n", "? [a]\n: 1\n", "*a\n", "&a\n"]))


@st.composite
def spec_bytes(draw: st.DrawFn) -> bytes:
    """What a spec file may hold: other encodings, broken UTF-8, BOMs, random bytes."""
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.binary(max_size=300))
    source = draw(spec_texts())
    if kind == 1:
        encoding = draw(st.sampled_from(["utf-16", "utf-32", "latin-1", "cp1252", "utf-8-sig"]))
        return source.encode(encoding, errors="replace")
    raw = bytearray(source.encode("utf-8"))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(raw)))
        raw[at:at] = draw(st.sampled_from([b"\xff", b"\xc3", b"\xe9", b"\xed\xa0\x80",
                                           b"\xef\xbb\xbf", b"\x00", b"\xf4\x90\x80\x80"]))
    return bytes(raw)
