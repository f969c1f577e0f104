"""The Ray Jobs executor's options as a hostile user gives them (no cluster needed).

An ``address`` that is not a dashboard URL (a line break, ``file://`` and other schemes
that Ray would read as a Python module to import, ``ray://``, a port out of range) and
``entrypoint_resources`` that Ray would refuse or that reserve nothing (negative, zero,
finer than 0.0001, past 1e14, ``CPU``/``GPU``, empty names, booleans) are refused when
the options are validated: exit 2 at ``executor.<option>``, before any connection and
with nothing written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kit.cli import user_error
from kit.fake_backend import write_spec
from kit.home import register_backends, use_home

from orchestrator.errors import UserInputError
from orchestrator.executors import validate_options
from orchestrator.executors.ray_client import RayAddressError

URL = "http://127.0.0.1:1"  # nothing listens there: reaching it would be RayAddressError
SWEEP = "hostile-ray-opts"

BAD_ADDRESSES = [
    "http://head:8265\nX-Injected: 1", "http://head:8265\r", "http://he ad:8265",
    " http://head:8265", "a\x00b", "file:///etc/passwd", "os://x", "gcs://head:6379",
    "ray://head:10001", "HTTP://head:8265", "ftp://head", "http://", "", ":8265",
    "http://head:99999", "http://head:-1", "http://head:port", "http://head:8265?x=1",
    "http://head:8265#frag", "head:8265?", "é\u2028"]
GOOD_ADDRESSES = ["http://head:8265", "https://user:pw@head/ray/", "head:8265",
                  "10.0.0.1:8265", "http://[::1]:8265", "auto"]
BAD_RESOURCES: list[Any] = [
    {"node_b": -1}, {"node_b": -0.0001}, {"node_b": 0}, {"node_b": 1e300}, {"node_b": 1e15},
    {"node_b": 0.00001}, {"node_b": 0.00015}, {"node_b": "nan"}, {"node_b": "inf"},
    {"node_b": True}, {"": 1}, {" ": 1}, {" node_b": 1}, {"node_b\n": 1}, {"a\x00": 1},
    {"CPU": 1}, {"GPU": 0.5}, {"memory": 1}, {"object_store_memory": 1},
    {"ok": 1, "CPU": 2}, {"node_b": [1]}, {"node_b": {"x": 1}}, ["node_b"], "node_b"]
GOOD_RESOURCES: list[dict[str, Any]] = [
    {}, {"node_b": 0.01}, {"node_b": 1}, {"node:10.0.0.1": 0.0001}, {"TPU": 4},
    {"node_b": 1e14}, {"a b": 2.5}]


def _where(options: dict[str, Any]) -> set[str]:
    with pytest.raises(UserInputError) as caught:
        validate_options("ray_jobs", options)
    for problem in caught.value.problems:
        assert problem.fix, problem  # every refusal says what to give instead
    return {problem.location.split(".")[1] for problem in caught.value.problems}


@pytest.mark.parametrize("address", BAD_ADDRESSES)
def test_an_address_that_is_no_dashboard_url_is_refused(address: str) -> None:
    assert _where({"address": address}) == {"address"}


@pytest.mark.parametrize("resources", BAD_RESOURCES)
def test_entrypoint_resources_ray_would_refuse_or_ignore_are_refused(resources: Any) -> None:
    assert _where({"address": URL, "entrypoint_resources": resources}) == {
        "entrypoint_resources"}


def test_good_addresses_and_resources_pass_unchanged() -> None:
    for address in GOOD_ADDRESSES:
        valid = validate_options("ray_jobs", {"address": address})
        assert valid.model_dump()["address"] == address
    for resources in GOOD_RESOURCES:
        valid = validate_options("ray_jobs", {"address": URL, "entrypoint_resources": resources})
        assert valid.model_dump()["entrypoint_resources"] == resources


def test_a_bad_ray_address_variable_is_refused_at_the_option(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "file:///etc/passwd")
    assert _where({}) == {"address"}


@pytest.mark.parametrize(("args", "where"), [
    (["--ray-address", "file:///etc/passwd"], "executor.address"),
    (["--ray-address", "http://head:8265\nX: 1"], "executor.address"),
    (["--ray-address", URL, "-E", 'entrypoint_resources={"CPU": 1}'],
     "executor.entrypoint_resources"),
    (["--ray-address", URL, "-E", 'entrypoint_resources={"node_b": -1}'],
     "executor.entrypoint_resources"),
])
def test_kappa_submit_refuses_a_bad_ray_option_before_connecting_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        args: list[str], where: str) -> None:
    from orchestrator.executors import ray_jobs

    connected: list[str] = []
    monkeypatch.setattr(ray_jobs, "bounded_client",
                        lambda address, *_: connected.append(address))  # a tripwire
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    home = use_home(tmp_path / "home", monkeypatch, cli=True)
    register_backends(monkeypatch)
    spec = write_spec(tmp_path / "s.yaml", SWEEP, seeds=1, steps=1)
    error = user_error(capsys, "submit", str(spec), "--executor", "ray_jobs", *args)  # exit 2
    assert not isinstance(error, RayAddressError), error
    assert where in {p.location for p in error.problems}
    assert not connected
    assert not (home / "runs" / SWEEP).exists()
    if (home / "registry.db").exists():  # nothing recorded for the sweep
        from orchestrator.registry import Registry

        with Registry.open() as reg:
            assert not reg.cells(SWEEP)
