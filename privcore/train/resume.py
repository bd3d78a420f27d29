"""Resumable training state without pickle: ``<stem>.resume.safetensors``.

A models directory is not trusted input: anyone who can write to it could leave a resume file,
and ``privcore train`` resumes by default. So the state is one safetensors file — its tensors,
plus a JSON header that the safetensors format keeps as metadata — and nothing in it is ever
unpickled (there is no ``torch.load`` here at all). Restoring goes in this order:

1. An old-format ``<stem>.resume.pt`` (a pickle) is never opened: it is ignored with a
   :class:`ResumeStateWarning` naming it (delete it; the run starts from its new state file).
2. The file is read once, and only its JSON header is parsed (no tensor yet): the format tag,
   the configuration (recipe, seed, data fingerprint, … — whatever the recipe passes, without
   the epoch count), then every tensor's name, dtype and shape against the modules, optimizers
   and generators of the current run.
3. Anything that differs, or a file that is not such a state (torn, edited, foreign), is
   **not an error: the run starts from epoch 0** with a :class:`ResumeStateWarning` naming the
   file and what differed, and the next epoch's state replaces it. Refusing would leave a
   stale file blocking every later run of a changed recipe, which is what resuming is for.
4. Only then are the tensors read (safetensors, no code) and loaded; the modules and optimizers
   are untouched whenever the state is not used.

What the state holds: each module's ``state_dict`` (parameters and buffers), each optimizer's
``state_dict`` (its tensors in the file, its numbers, tuples and parameter indices in the JSON
header), the shuffling generator's state, torch's global CPU generator, the epoch count and the
loss history. Learning-rate schedules are functions of the epoch (the recipes), and training
draws no numbers from numpy's or Python's ``random``, so neither is stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from privcore._atomic import atomic_path

__all__ = ["FORMAT", "ResumableRun", "ResumeStateWarning", "config_hash"]

FORMAT = "privcore.resume/1"
_KEY = "privcore.resume"
_MAX_HEADER = 64 << 20  # bytes of JSON header accepted (the real ones are a few kB)
_DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}
_TAGS = ("tensor", "dict", "list", "tuple")


class ResumeStateWarning(UserWarning):
    """A resume file was not used (old format, another configuration, or not a valid state)."""


class _Unusable(Exception):
    """Why a resume file cannot be used (turned into a warning and a fresh start)."""


def config_hash(config: Mapping[str, Any]) -> str:
    """SHA-256 of a JSON-able configuration (resume only continues the same configuration)."""
    return hashlib.sha256(_config_json(config).encode()).hexdigest()


def _config_json(config: Mapping[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, default=str)


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new), key=str):
            out += _differences(old.get(k, "<absent>"), new.get(k, "<absent>"), f"{prefix}{k}.")
        return out
    return [] if old == new else [prefix.rstrip(".") or "the whole configuration"]


class _Encoder:
    """Nested dicts/lists/tuples of numbers, strings, None and tensors → JSON with tensor names."""

    def __init__(self, prefix: str, tensors: dict[str, torch.Tensor]) -> None:
        self.prefix, self.tensors = prefix, tensors

    def __call__(self, x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            name = f"{self.prefix}/{len(self.tensors)}"
            self.tensors[name] = x.detach().to("cpu").clone(memory_format=torch.contiguous_format)
            return {"tensor": name}
        if isinstance(x, dict):
            return {"dict": [[self(k), self(v)] for k, v in x.items()]}
        if isinstance(x, list | tuple):
            return {"list" if isinstance(x, list) else "tuple": [self(v) for v in x]}
        if x is None or isinstance(x, bool | int | float | str):
            return x
        raise TypeError(f"a resume file cannot hold {type(x).__name__} {x!r} (optimizer state)")


def _decode(x: Any, tensors: Mapping[str, Any], prefix: str) -> Any:
    """Inverse of :class:`_Encoder` for the tensors named ``prefix/…``; anything else in the
    header is refused."""
    if x is None or isinstance(x, bool | int | float | str):
        return x
    if not (isinstance(x, dict) and len(x) == 1 and next(iter(x)) in _TAGS):
        raise _Unusable(f"unexpected value in the header: {str(x)[:80]}")
    tag, body = next(iter(x.items()))
    if tag == "tensor":
        if not isinstance(body, str) or not body.startswith(prefix + "/") or body not in tensors:
            raise _Unusable(f"the header names a tensor the file does not hold: {str(body)[:80]}")
        return tensors[body]
    if not isinstance(body, list):
        raise _Unusable(f"unexpected {tag} in the header")
    if tag == "dict":
        if not all(isinstance(kv, list) and len(kv) == 2 for kv in body):
            raise _Unusable("unexpected dict in the header")
        pairs = [(_decode(k, tensors, prefix), _decode(v, tensors, prefix)) for k, v in body]
        if not all(isinstance(k, str | int) for k, _ in pairs):
            raise _Unusable("a dict key in the header is neither a string nor an integer")
        return dict(pairs)
    items = [_decode(v, tensors, prefix) for v in body]
    return items if tag == "list" else tuple(items)


class _Spec:
    """A tensor's dtype and shape as the safetensors header states them."""

    def __init__(self, entry: Any, name: str) -> None:
        if not (isinstance(entry, dict) and isinstance(entry.get("dtype"), str)
                and isinstance(entry.get("shape"), list)):
            raise _Unusable(f"tensor {name!r} has no dtype/shape in the header")
        self.dtype, self.shape = entry["dtype"], entry["shape"]

    def check(self, what: str, like: torch.Tensor) -> None:
        want = (_DTYPES.get(like.dtype, str(like.dtype)), list(like.shape))
        if (self.dtype, self.shape) != want:
            raise _Unusable(
                f"{what} has shape {self.shape} ({self.dtype}) in the file, {want[1]} ({want[0]}) in this run"
            )


def _read_header(data: bytes) -> tuple[dict[str, _Spec], dict[str, Any]]:
    """The tensors' specs and the JSON state of a safetensors file, without reading a tensor."""
    if len(data) < 8:
        raise _Unusable("the file is too short to be a safetensors file")
    n = int.from_bytes(data[:8], "little")
    if n > min(_MAX_HEADER, len(data) - 8) or data[8:9] != b"{":
        raise _Unusable("not a safetensors file (a pickle, torn or foreign file)")
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
        state = json.loads(header["__metadata__"][_KEY])
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise _Unusable(f"no readable privcore resume header ({type(exc).__name__})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise _Unusable(f"format is not {FORMAT!r}")
    specs = {k: _Spec(v, k) for k, v in header.items() if k != "__metadata__"}
    return specs, state


class ResumableRun:
    """Per-epoch training state in ``<stem>.resume.safetensors`` (the module docstring says what
    it holds and in which order a restore checks it) so that an interrupted run continues where it
    stopped. A state written for a different configuration, for networks of other shapes, or
    that is not a valid state at all is ignored with a :class:`ResumeStateWarning` (the run
    starts over and replaces it); an old pickled ``<stem>.resume.pt`` is never opened.
    ``config`` should leave out the epoch count, so a run can be stopped early (``--epochs``
    lower) or extended (higher) and still continue from its state. The file is deleted once the
    final checkpoint is written."""

    def __init__(
        self, stem: str | os.PathLike[str], *, config: Mapping[str, Any], enabled: bool = True
    ) -> None:
        self.path = Path(str(stem) + ".resume.safetensors")
        self.legacy_path = Path(str(stem) + ".resume.pt")
        self.config = json.loads(_config_json(config))
        self.hash = config_hash(config)
        self.enabled = enabled

    def _warn(self, path: Path, why: str) -> None:
        warnings.warn(f"{path}: {why}", ResumeStateWarning, stacklevel=3)

    def restore(
        self,
        modules: Mapping[str, nn.Module],
        optimizers: Mapping[str, torch.optim.Optimizer],
        generator: torch.Generator,
    ) -> tuple[int, list[dict[str, float]]]:
        """Load a matching saved state into the given objects; returns (epochs done, history).
        (0, []) and the objects untouched when there is no usable state."""
        if not self.enabled:
            return 0, []
        if self.legacy_path.exists():
            self._warn(self.legacy_path, "an old-format (pickled) resume file, never loaded since loading "
                       "it could run code; delete it (this run keeps its state in "
                       f"{self.path.name})")
        if not self.path.is_file():
            return 0, []
        from safetensors import SafetensorError
        from safetensors.torch import load

        try:
            data = self.path.read_bytes()
            specs, state = _read_header(data)
            epoch, history, module_keys = self._check(specs, state, modules, optimizers, generator)
            tensors = load(data)  # only now, the header checked: names, dtypes and shapes (no code)
        except (_Unusable, OSError, SafetensorError) as exc:
            self._warn(self.path, f"resume state not used, starting from epoch 0: {exc}")
            return 0, []
        try:
            opt_states = {k: _decode(state["optimizers"][k], tensors, f"o/{k}") for k in optimizers}
            for k, m in modules.items():
                m.load_state_dict({key: tensors[f"m/{k}/{key}"] for key in module_keys[k]}, strict=True)
            for k, o in optimizers.items():
                o.load_state_dict(opt_states[k])
        except (_Unusable, KeyError, ValueError, RuntimeError) as exc:
            from privcore.errors import CheckpointError

            raise CheckpointError(
                f"{self.path}: the resume state passed its checks but could not be loaded ({exc}); "
                "delete it to start over"
            ) from exc
        generator.set_state(tensors["rng/generator"])
        torch.set_rng_state(tensors["rng/torch"])
        return epoch, history

    def _check(
        self,
        specs: dict[str, _Spec],
        state: dict[str, Any],
        modules: Mapping[str, nn.Module],
        optimizers: Mapping[str, torch.optim.Optimizer],
        generator: torch.Generator,
    ) -> tuple[int, list[dict[str, Any]], dict[str, list[str]]]:
        """Every check of a restore that needs no tensor (module docstring, step 2)."""
        if state.get("config_hash") != self.hash or state.get("config") != self.config:
            old = state.get("config")
            what = ", ".join(_differences(old, self.config)[:6]) if isinstance(old, dict) else "unknown"
            raise _Unusable(f"it was written for another configuration (differs in: {what})")
        epoch, history = state.get("epoch"), state.get("history")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise _Unusable(f"epoch must be an integer ≥ 0, got {epoch!r}")
        if not (isinstance(history, list) and all(_is_row(r) for r in history)):
            raise _Unusable("the history is not a list of rows of numbers and strings")
        mkeys, okeys = state.get("modules"), state.get("optimizers")
        if not (isinstance(mkeys, dict) and set(mkeys) == set(modules)):
            raise _Unusable(f"modules differ: {sorted(mkeys) if isinstance(mkeys, dict) else mkeys} "
                            f"in the file, {sorted(modules)} in this run")
        if not (isinstance(okeys, dict) and set(okeys) == set(optimizers)):
            raise _Unusable("the optimizers differ from this run's")
        expected = {"rng/generator": generator.get_state(), "rng/torch": torch.get_rng_state()}
        for k, m in modules.items():
            own = m.state_dict()
            if mkeys[k] != list(own):
                raise _Unusable(f"{k}: the file's parameters and buffers are not this network's")
            expected.update({f"m/{k}/{key}": v for key, v in own.items()})
        for name, like in expected.items():
            if name not in specs:
                raise _Unusable(f"tensor {name!r} is missing")
            specs[name].check(name.removeprefix("m/").replace("/", ": ", 1), like)
        for k, o in optimizers.items():
            self._check_optimizer(k, o, specs, okeys[k])
        if any(n not in expected and not n.startswith(tuple(f"o/{k}/" for k in optimizers)) for n in specs):
            raise _Unusable("the file holds tensors this run does not use")
        return epoch, history, {k: list(v) for k, v in mkeys.items()}

    @staticmethod
    def _check_optimizer(name: str, opt: torch.optim.Optimizer, specs: dict[str, _Spec], enc: Any) -> None:
        saved = _decode(enc, specs, f"o/{name}")  # tensors stand as their specs: nothing is read
        own = opt.state_dict()
        groups = saved.get("param_groups") if isinstance(saved, dict) else None
        if not (isinstance(groups, list) and len(groups) == len(own["param_groups"])):
            raise _Unusable(f"{name}: the optimizer's parameter groups differ from this run's")
        for g, mine in zip(groups, own["param_groups"], strict=True):
            if not isinstance(g, dict) or g.get("params") != mine["params"]:
                raise _Unusable(f"{name}: the optimizer's parameters differ from this run's")
        params = [p for group in opt.param_groups for p in group["params"]]
        per_param = saved.get("state")
        if not isinstance(per_param, dict) or not set(per_param) <= set(range(len(params))):
            raise _Unusable(f"{name}: the optimizer's state does not match its parameters")
        for i, entry in per_param.items():
            if not isinstance(entry, dict):
                raise _Unusable(f"{name}: the optimizer's state of parameter {i} is not a dict")
            for key, spec in entry.items():
                if isinstance(spec, _Spec) and spec.shape and spec.shape != list(params[i].shape):
                    raise _Unusable(f"{name}: state {key!r} of parameter {i} has shape {spec.shape}, "
                                    f"the parameter {list(params[i].shape)}")

    def save(
        self,
        epoch: int,
        modules: Mapping[str, nn.Module],
        optimizers: Mapping[str, torch.optim.Optimizer],
        generator: torch.Generator,
        history: list[dict[str, float]],
    ) -> None:
        """Write the state after ``epoch`` epochs (atomically: the previous state or this one)."""
        if not self.enabled:
            return
        import safetensors.torch

        tensors: dict[str, torch.Tensor] = {
            "rng/generator": generator.get_state(),
            "rng/torch": torch.get_rng_state(),
        }
        keys: dict[str, list[str]] = {}
        for k, m in modules.items():
            own = m.state_dict()
            keys[k] = list(own)
            tensors.update(
                {f"m/{k}/{key}": v.detach().to("cpu").clone(memory_format=torch.contiguous_format)
                 for key, v in own.items()}
            )
        opts = {k: _Encoder(f"o/{k}", tensors)(o.state_dict()) for k, o in optimizers.items()}
        state = {
            "format": FORMAT,
            "config_hash": self.hash,
            "config": self.config,
            "epoch": int(epoch),
            "history": history,
            "modules": keys,
            "optimizers": opts,
        }
        meta = {_KEY: json.dumps(state, allow_nan=True)}
        with atomic_path(self.path) as tmp:
            safetensors.torch.save_file(tensors, str(tmp), metadata=meta)

    def finish(self) -> None:
        """Remove the state file (the run completed)."""
        self.path.unlink(missing_ok=True)


def _is_row(row: Any) -> bool:
    return isinstance(row, dict) and all(
        isinstance(k, str) and (v is None or isinstance(v, bool | int | float | str)) for k, v in row.items()
    )
