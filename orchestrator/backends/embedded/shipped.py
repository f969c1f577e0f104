"""The base models shipped with kappa: warm starts built by ``scripts/build_base_models.py``,
kept in ``base_models/`` and listed with their checksums in its ``manifest.json``.

A warm start depends on the CPU kernels that built it (AVX-512 and AVX2 round differently;
600 optimizer steps amplify that), so a cell whose warm-start settings match a shipped model
loads that file, whatever the machine or torch version (:func:`base_key` leaves both out).
A shipped file failing its checksum is refused, never rebuilt: a rebuilt one would differ
from every other machine's. Torch-free, so ``kappa plan``'s preflight stays light."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from orchestrator.backends.embedded.settings import EmbeddedSettings
from orchestrator.errors import Problem, UserInputError

FORMAT_VERSION = 1  # of the warm start's training recipe: bump when it changes the weights
FOLDER = Path(__file__).parent / "base_models"
MANIFEST = "manifest.json"
BUILD_SCRIPT = "scripts/build_base_models.py"


def key_content(settings: EmbeddedSettings) -> dict[str, Any]:
    """Everything the warm-start weights depend on except the machine and torch's version."""
    from orchestrator.backends.embedded.tasks import TOKENIZER

    return {
        "version": FORMAT_VERSION,
        "task": settings.task,
        "model": {"vocab_size": TOKENIZER.vocab_size, **settings.model.model_dump()},
        "warm_start": settings.warm_start.model_dump(mode="json"),
        # The warm start trains around the held-out validation prompts, which depend on
        # it: two val_size values must not share weights trained on the other's set.
        "val_size": settings.val_size,
    }


def digest(content: Mapping[str, Any]) -> str:
    """The 20-hex-digit content hash that names a warm start."""
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:20]


def base_key(settings: EmbeddedSettings) -> str:
    """The key of the shipped base model these settings would load."""
    return digest(key_content(settings))


def sha256_file(path: Path) -> str:
    """The file's SHA-256, hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class ShippedModel:
    """A manifest entry: the file and the checksum it must have."""

    key: str
    path: Path
    sha256: str


def manifest() -> dict[str, dict[str, Any]]:
    """The manifest's entries by key (none without a manifest)."""
    path = FOLDER / MANIFEST
    if not path.exists():
        return {}
    models: dict[str, dict[str, Any]] = json.loads(path.read_text())["models"]
    return models


def shipped_models() -> dict[str, ShippedModel]:
    """Every model the manifest lists, by key."""
    return {key: ShippedModel(key, FOLDER / entry["file"], entry["sha256"])
            for key, entry in manifest().items()}


def lookup(settings: EmbeddedSettings,
           models: Mapping[str, ShippedModel] | None = None) -> ShippedModel | None:
    """The shipped base model of these settings, if any (``models``: :func:`shipped_models`)."""
    return (shipped_models() if models is None else models).get(base_key(settings))


def damage(model: ShippedModel) -> Problem | None:
    """What is wrong with a shipped file (missing, or not its checksum); ``None``: intact."""
    found = sha256_file(model.path) if model.path.is_file() else "no such file"
    if found == model.sha256:
        return None
    return Problem(
        "warm_start", f"the shipped base model {model.path} fails its checksum: it is refused "
        "(a rebuilt one would differ from every other machine's)",
        found=found, allowed=f"sha256 {model.sha256}",
        fix="reinstall kappa (`pip install --force-reinstall kappa-orchestrator`; in a git "
            f"checkout, `git checkout -- {model.path.parent}`), or rebuild the shipped models "
            f"on this machine with `python {BUILD_SCRIPT}`")


def verified(settings: EmbeddedSettings) -> ShippedModel | None:
    """The intact shipped base model of these settings, ``None`` if none; damaged: an error."""
    model = lookup(settings)
    if model is not None and (problem := damage(model)) is not None:
        raise UserInputError("damaged shipped base model", [problem])
    return model


def problems(cells: Mapping[str, EmbeddedSettings]) -> list[Problem]:
    """The embedded preflight: a problem at ``<label>.warm_start`` per cell whose shipped base
    model is damaged (each file hashed once)."""
    models, damage_of = shipped_models(), cache(damage)
    out = []
    for label, settings in cells.items():
        model = lookup(settings, models)
        if model is not None and (problem := damage_of(model)) is not None:
            out.append(replace(problem, location=".".join(filter(None, (label, "warm_start")))))
    return out


def damaged_files() -> list[Problem]:
    """Every shipped file that is missing or fails its checksum (``kappa doctor``)."""
    return [p for p in map(damage, shipped_models().values()) if p is not None]
