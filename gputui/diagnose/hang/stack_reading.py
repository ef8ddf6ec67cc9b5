"""Reading one rank's stack: which frames are the user's, and which collective it waits in.

A culprit's line is the innermost frame of *user* code, skipping torch, the standard library,
installed packages, `<frozen ...>` and native frames when a user frame exists, because the line
a person can change is in their own code. Pure; used by gputui.diagnose.hang.culprit (the stacks
explainer) and gputui.diagnose.gone.lastwords (a dead rank's traceback).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from gputui.collect.frames import Frame, collective_name

_STDLIB = frozenset(sys.stdlib_module_names) - {"__main__", "test"}
# Installed libraries whose frames py-spy shows relative to site-packages (`torch/...`),
# so their paths do not say "site-packages". A user frame is never one of these.
_LIBRARIES = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "torchdata",
        "torchtext",
        "functorch",
        "triton",
        "numpy",
        "transformers",
        "accelerate",
        "deepspeed",
        "datasets",
        "apex",
        "lightning",
        "lightning_fabric",
        "pytorch_lightning",
        "fairscale",
        "xformers",
        "flash_attn",
        "jax",
        "jaxlib",
        "flax",
        "tensorflow",
        "keras",
        "cupy",
        "ray",
        "tqdm",
        "wandb",
        "safetensors",
        "huggingface_hub",
        "pkg_resources",
        "setuptools",
        "_pytest",
        "pluggy",
    }
)


# ---------------------------------------------------------------- reading one stack


def is_library(f: Frame, main_file: str | None = None) -> bool:
    """Whether a frame is somebody else's code: a library, the stdlib, or native."""
    if f.native or f.file.startswith("<frozen") or f.file.startswith("<built-in"):
        return True
    if main_file is not None and f.file == main_file:
        return False  # the script that was run is the user's, whatever its name
    path = f.file.replace("\\", "/")
    parts = [p for p in path.split("/") if p]
    if any(p in ("site-packages", "dist-packages") for p in parts):
        return True
    if path.startswith("/"):
        # An absolute path under a Python installation's lib/pythonX.Y is the stdlib.
        return any(p.startswith("python3") for p in parts[:-1]) and "lib" in parts
    top = parts[0].removesuffix(".py") if parts else ""
    return top in _LIBRARIES or top in _STDLIB


def _main_file(frames: Sequence[Frame]) -> str | None:
    """The file of the script that was run: the outermost `<module>` frame (`python -m`
    puts runpy's frames outside it, but they are functions, not modules), unless it is an
    installed package's. Its name may be a stdlib module's (`queue.py`): it is still ours."""
    for f in reversed(frames):
        if f.function == "<module>":
            installed = ("site-packages", "dist-packages", "<frozen")
            return None if any(m in f.file for m in installed) else f.file
    return None


@dataclass(frozen=True)
class Reading:
    """What one rank's main thread says."""

    frame: Frame | None  # innermost user frame (else the innermost frame)
    collective: str | None  # the collective it waits in (all_reduce, broadcast...)
    site: Frame | None  # the user frame that entered that collective

    def where(self) -> str | None:
        """`all_reduce (train.py:44)`: the collective and the user line that entered it."""
        if self.collective is None or self.site is None:
            return None
        return f"{self.collective} ({self.site.site()})"


def read_stack(frames: Sequence[Frame]) -> Reading:
    """The user frame, and the collective (with its call site) of a main thread's frames."""
    if not frames:
        return Reading(None, None, None)
    main = _main_file(frames)
    user = [not is_library(f, main) for f in frames]
    frame = next((f for f, u in zip(frames, user, strict=True) if u), None)
    if frame is None:
        frame = next((f for f in frames if not f.native), frames[0])
    for i, f in enumerate(frames):
        name = collective_name(f)
        # A stdlib `recv` or `wait` is a queue or a socket, not a peer's collective.
        if name is None or (is_library(f) and not _is_known_library(f)):
            continue
        site = next((frames[j] for j in range(i, len(frames)) if user[j]), f)
        return Reading(frame, name, site)
    return Reading(frame, None, None)


def _is_known_library(f: Frame) -> bool:
    """Native frames (cuCtxSynchronize) and listed libraries (torch) may hold collectives."""
    if f.native:
        return True
    top = f.file.replace("\\", "/").lstrip("/").split("/")[0].removesuffix(".py")
    return top in _LIBRARIES or "site-packages" in f.file or "dist-packages" in f.file


def user_chain(frames: Sequence[Frame]) -> list[Frame]:
    """The user frames of a main thread's stack, innermost first."""
    main = _main_file(frames)
    return [f for f in frames if not is_library(f, main)]
