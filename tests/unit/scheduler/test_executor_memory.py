"""A sweep's executor lives in the registry (any machine sharing it continues on it),
with every password in its options masked: a use that needs the password is refused
until it is given again, never sent to a cluster as ``***``."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import UserInputError
from orchestrator.sweeps.executor_choice import (
    ExecutorChoice,
    choose_executor,
    is_masked,
    remember_executor,
    remembered_executor,
    storable,
)
from orchestrator.sweeps.stores import Stores

SECRET = "http://kappa:s3cret@head:8265"


def test_passwords_are_masked_and_known_as_masked() -> None:
    stored = storable({"address": SECRET, "nested": {"dsn": "host=db password=pw"}, "n": 3})
    assert stored == {"address": "http://kappa:***@head:8265",
                      "nested": {"dsn": "host=db password=***"}, "n": 3}
    assert is_masked(stored["address"]) and is_masked(stored["nested"])
    assert not is_masked(SECRET) and not is_masked("***") and not is_masked(3)


def test_the_registry_remembers_the_executor_without_its_password(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    stores = Stores(registry_url=f"sqlite:///{tmp_path / 'registry.db'}")
    assert remembered_executor("s", stores) == ExecutorChoice()  # no registry yet
    assert not (tmp_path / "registry.db").exists()
    with stores.open_registry() as reg:
        reg.upsert_sweep("s", backend="embedded", spec_text="name: s\n")
        chosen = choose_executor("s", ExecutorChoice("ray_jobs", {"address": SECRET}), reg)
        remember_executor("s", chosen, reg)
        assert reg.executor("s") == ("ray_jobs", {"address": "http://kappa:***@head:8265"})
        assert "s3cret" not in str(reg.executor("s"))
    # Another machine: the password must be given again, and then it is used.
    with pytest.raises(UserInputError, match="RAY_ADDRESS") as err:
        choose_executor("s", None, stores)
    assert "s3cret" not in str(err.value)
    given = ExecutorChoice(None, shortcuts={"ray_jobs": {"address": SECRET}})
    again = choose_executor("s", given, stores)
    assert again.name == "ray_jobs" and again.options["address"] == SECRET
