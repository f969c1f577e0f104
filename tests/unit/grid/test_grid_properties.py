"""Property tests of expansion on random specs (hypothesis)."""

from __future__ import annotations

import itertools
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.backends import get_backend
from orchestrator.grid import content_id, expand
from orchestrator.spec import parse_spec, scalar_key

LIST_AXES: dict[str, st.SearchStrategy[Any]] = {
    "seed": st.integers(0, 1000),
    "max_steps": st.integers(1, 500),
    "temperature": st.sampled_from([0.5, 0.7, 1.0, 1.3]),
    "baseline": st.sampled_from(["grpo", "drgrpo", "gspo", "dapo", "clip_cov", "kl_cov"]),
    "reward_budget": st.booleans(),
    "group_size": st.integers(2, 16),
    "tag": st.sampled_from(["a", "b", "c", "d"]),
}
# Values an include may bring that the axis does not list.
OPEN_AXES = ("seed", "max_steps", "tag")
VARIANTS = {
    "k5000": {"reward_correct": 5, "reward_incorrect": 0, "kl_coef": 0.001},
    "k200": {"kl_coef": 0.005, "reward_correct": 1},
    "spurious": {"reward_type": "random"},
    "neg": {"reward_correct": 1, "reward_incorrect": -1},
}
SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(
        st.lists(st.sampled_from([*LIST_AXES, "kappa"]), min_size=1, max_size=4, unique=True)
    )
    axes: dict[str, Any] = {}
    for name in names:
        if name == "kappa":
            chosen = draw(
                st.lists(st.sampled_from(sorted(VARIANTS)), min_size=1, max_size=3, unique=True)
            )
            axes[name] = {v: dict(VARIANTS[v]) for v in chosen}
        else:
            axes[name] = draw(
                st.lists(LIST_AXES[name], min_size=1, max_size=3, unique_by=scalar_key)
            )

    def pick(name: str) -> Any:
        return draw(st.sampled_from(list(axes[name])))

    exclude = [
        {
            n: pick(n)
            for n in draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
        }
        for _ in range(draw(st.integers(0, 2)))
    ]
    include = []
    for _ in range(draw(st.integers(0, 2))):
        entry = {}
        for n in names:
            fresh = n in OPEN_AXES and draw(st.booleans())
            entry[n] = draw(LIST_AXES[n]) if fresh else pick(n)
        include.append(entry)
    spec: dict[str, Any] = {
        "name": "prop",
        "base": {"max_steps": 20, "learning_rate": 0.002},
        "axes": axes,
    }
    if "tag" in axes:
        spec["labels"] = ["tag"]
    if exclude:
        spec["exclude"] = exclude
    if include:
        spec["include"] = include
    return spec


def expected_assignments(spec: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Brute force: the product, minus exclusions, plus new includes."""
    names = list(spec["axes"])
    keyed = [[scalar_key(v) for v in spec["axes"][n]] for n in names]
    out = []
    for combo in itertools.product(*keyed):
        cell = dict(zip(names, combo, strict=True))
        if not any(
            all(cell[k] == scalar_key(v) for k, v in rule.items())
            for rule in spec.get("exclude", [])
        ):
            out.append(combo)
    for entry in spec.get("include", []):
        combo = tuple(scalar_key(entry[n]) for n in names)
        if combo not in out:
            out.append(combo)
    return out


def reordered(spec: dict[str, Any]) -> dict[str, Any]:
    """The same spec with every order-free mapping reversed (axes keep their order)."""
    out: dict[str, Any] = {}
    for key in reversed(list(spec)):
        value = spec[key]
        if key == "base":
            value = dict(reversed(list(value.items())))
        elif key == "axes":
            value = {
                n: (
                    {v: dict(reversed(list(s.items()))) for v, s in vals.items()}
                    if isinstance(vals, dict)
                    else vals
                )
                for n, vals in value.items()
            }
        elif key in ("exclude", "include"):
            value = [dict(reversed(list(e.items()))) for e in value]
        out[key] = value
    out["name"] = "another-name"
    return out


def grid_of(spec: dict[str, Any]) -> Any:
    return expand(parse_spec(yaml.safe_dump(spec, sort_keys=False), "prop.yaml"))


@given(spec=specs())
@SETTINGS
def test_count_is_product_minus_excluded_plus_included(spec: dict[str, Any], coupling: str) -> None:
    expected = expected_assignments(spec)
    if not expected:
        return  # everything excluded: covered by an explicit error test
    grid = grid_of(spec)
    assert len(grid) == len(expected)
    got = [tuple(scalar_key(v) for v in c.axes.values()) for c in grid]
    assert got == expected
    assert len({c.cell_id for c in grid}) == len(grid)


@given(spec=specs())
@SETTINGS
def test_ids_stable_under_key_order_and_equal_to_definition(
    spec: dict[str, Any], coupling: str
) -> None:
    if not expected_assignments(spec):
        return
    grid = grid_of(spec)
    again = grid_of(reordered(spec))
    assert [c.cell_id for c in grid] == [c.cell_id for c in again]
    backend = get_backend("embedded")
    for cell in grid.cells[:5]:
        dump = backend.validate(cell.settings).model_dump(mode="json")
        assert cell.cell_id == content_id("embedded", dump, cell.labels)
