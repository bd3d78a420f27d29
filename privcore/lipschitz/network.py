"""Parse a torch ReLU network into float64 weight lists, and hash it.

LipMIP (Jordan & Dimakis, NeurIPS 2020, §3) is exact for compositions of affine maps and
ReLUs, so this is the only kind of network the engine accepts:
``f = A_L ∘ ReLU ∘ A_{L-1} ∘ … ∘ ReLU ∘ A_1`` with ``A_i(x) = W_i x + b_i``. Any torch
module whose traced graph is a single chain of ``nn.Linear``, ``nn.ReLU`` (module or
``torch.relu`` / ``F.relu`` / ``.relu()``) and ``nn.Identity`` is accepted; consecutive
affine maps are composed and a trailing ReLU gets an identity output layer. Everything else
(other activations, dropout, batch norm, skip connections, convolutions) is refused with
a message naming the offending operation, because the MILP would not describe it.
"""

from __future__ import annotations

import functools
import hashlib
import operator
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from privcore.errors import PrivcoreError

__all__ = ["ReluNetwork", "UnsupportedNetworkError", "as_network", "model_hash"]


class UnsupportedNetworkError(PrivcoreError, TypeError):
    """The module is not a chain of Linear and ReLU layers, so LipMIP does not apply."""


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64, copy=True)
    a.setflags(write=False)
    return a


#: largest ∏‖W_i‖∞ accepted: the engine's bounds (products of Jacobian entries) then stay finite
MAX_WEIGHT_PRODUCT = 1e150


@dataclass(frozen=True, eq=False)
class ReluNetwork:
    """A ReLU MLP in float64: ``x ↦ W_L relu(… relu(W_1 x + b_1) …) + b_L``.

    ``weights[i]`` has shape ``(n_{i+1}, n_i)``; ReLU follows every layer but the last.
    ``digest`` is the model hash (architecture + parameters) used as a cache key.
    """

    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    digest: str

    @classmethod
    def from_arrays(cls, weights: Any, biases: Any, *, digest: str | None = None) -> ReluNetwork:
        """Build from lists of weight matrices and bias vectors (checked, copied to float64)."""
        from privcore.validation import check_finite_array

        ws = tuple(_frozen(check_finite_array(f"weights[{i}]", w)) for i, w in enumerate(weights))
        bs = tuple(_frozen(check_finite_array(f"biases[{i}]", b)) for i, b in enumerate(biases))
        if not ws or len(ws) != len(bs):
            raise ValueError(f"need one bias vector per weight matrix (≥ 1), got {len(ws)} and {len(bs)}")
        for i, (w, b) in enumerate(zip(ws, bs, strict=True)):
            if w.ndim != 2 or b.shape != (w.shape[0],):
                raise ValueError(f"layer {i}: weight shape {w.shape} and bias shape {b.shape} do not match")
            if i and w.shape[1] != ws[i - 1].shape[0]:
                raise ValueError(
                    f"layer {i}: input width {w.shape[1]} ≠ previous output width {ws[i - 1].shape[0]}"
                )
        # ∏ ‖W_i‖∞ bounds every Lipschitz constant and Jacobian entry the engine computes
        product = 1.0
        with np.errstate(over="ignore"):
            for w in ws:
                product *= float(np.abs(w).sum(axis=1).max(initial=0.0))
        if not product <= MAX_WEIGHT_PRODUCT:
            raise ValueError(
                f"weights: the product of the layers' ℓ∞ operator norms is {product:.4g}, above "
                f"{MAX_WEIGHT_PRODUCT:.0e}; Lipschitz bounds of such a network overflow float64"
            )
        if digest is None:
            h = hashlib.sha256(b"privcore.ReluNetwork.v1")
            for w, b in zip(ws, bs, strict=True):
                h.update(repr(w.shape).encode())
                h.update(np.ascontiguousarray(w, dtype="<f8").tobytes())
                h.update(np.ascontiguousarray(b, dtype="<f8").tobytes())
            digest = h.hexdigest()
        return cls(weights=ws, biases=bs, digest=digest)

    @property
    def in_dim(self) -> int:
        """Input dimension d."""
        return int(self.weights[0].shape[1])

    @property
    def out_dim(self) -> int:
        """Output dimension m."""
        return int(self.weights[-1].shape[0])

    @property
    def hidden_widths(self) -> tuple[int, ...]:
        """Widths of the ReLU layers."""
        return tuple(int(w.shape[0]) for w in self.weights[:-1])

    @property
    def n_hidden(self) -> int:
        """Number of ReLU neurons."""
        return int(sum(self.hidden_widths))

    @property
    def hidden_offsets(self) -> tuple[int, ...]:
        """Where each ReLU layer starts in a flat pattern over all hidden neurons, then their total."""
        return tuple(int(v) for v in np.concatenate([[0], np.cumsum(self.hidden_widths)]))

    def split_pattern(self, flat: np.ndarray) -> list[np.ndarray]:
        """A flat pattern ``(..., n_hidden)`` as one array per ReLU layer (split along the last axis)."""
        return np.split(np.asarray(flat), self.hidden_offsets[1:-1], axis=-1)

    def describe(self) -> str:
        """Architecture as ``d→h1→…→m``."""
        return "→".join(str(n) for n in (self.in_dim, *self.hidden_widths, self.out_dim))

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Evaluate on a point ``(d,)`` or a batch ``(n, d)`` in float64."""
        a = np.asarray(x, dtype=np.float64)
        for w, b in zip(self.weights[:-1], self.biases[:-1], strict=True):
            a = np.maximum(a @ w.T + b, 0.0)
        return a @ self.weights[-1].T + self.biases[-1]

    def preactivations(self, x: np.ndarray) -> list[np.ndarray]:
        """Hidden pre-activations for a batch ``(n, d)``, one ``(n, width)`` array per ReLU layer."""
        a = np.atleast_2d(np.asarray(x, dtype=np.float64))
        out = []
        for w, b in zip(self.weights[:-1], self.biases[:-1], strict=True):
            z = a @ w.T + b
            out.append(z)
            a = np.maximum(z, 0.0)
        return out

    def jacobians(self, x: np.ndarray, patterns: list[np.ndarray] | None = None) -> np.ndarray:
        """Jacobians ``(n, m, d)`` at a batch of points (ReLU'(0) := 0), or for given 0/1 patterns."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        if patterns is None:
            patterns = [(z > 0).astype(np.float64) for z in self.preactivations(x)]
        n = x.shape[0]
        jac = np.broadcast_to(self.weights[0], (n, *self.weights[0].shape))
        for w, s in zip(self.weights[1:], patterns, strict=True):
            s = np.broadcast_to(np.atleast_2d(s), (n, w.shape[1]))
            jac = np.matmul(w, s[:, :, None] * jac)
        return np.array(jac)


def _modules_of(module: Any) -> list[Any]:
    """``module`` and every submodule, breadth first, each once (as ``named_modules``: a module shared,
    or one that contains itself, is not walked twice)."""
    out = [module]
    seen = {id(module)}
    i = 0
    while i < len(out):
        for c in out[i]._modules.values():
            if c is not None and id(c) not in seen:
                seen.add(id(c))
                out.append(c)
        i += 1
    return out


def _tensors_of(modules: list[Any]) -> list[Any]:
    """Every parameter and buffer of ``modules``, in order (None for a slot registered empty)."""
    return [t for m in modules for t in (*m._parameters.values(), *m._buffers.values())]


def _layout(t: Any) -> tuple[Any, ...]:
    """Where a tensor's values are and how they are read: address, dtype, shape, strides."""
    return (t.data_ptr(), t.dtype, t.shape, t.stride())


@functools.cache
def _plain_layers() -> frozenset[type]:
    """The layer classes whose forward reads nothing but their tensors and children (the chain
    reader's, :func:`_sequential_ops`): their other attributes cannot change what they compute."""
    import torch

    return frozenset({torch.nn.Linear, torch.nn.ReLU, torch.nn.Identity, torch.nn.Sequential})


@dataclass(frozen=True, eq=False)
class _Snapshot:
    """A torch module's state when it was hashed and parsed, to tell cheaply and exactly that it is
    still the same: the same modules (same objects, of the same classes, with the same attribute
    objects but for the plain layers, whose forward reads only their tensors and children), the same
    parameter and buffer objects, and each holding the same bytes at the same address with the same
    dtype, shape and strides. Anything else counts as a change (conservatively: an attribute set again
    to an equal but new object is one).

    A version counter (``tensor._version``) would not do: writes through ``.data`` or through a numpy
    view of the weights leave it unchanged. So the bytes are compared, through numpy views of the
    tensors' memory taken here, which keep that memory alive (an unchanged address is the same
    memory). A copy and a ``memcmp`` per tensor cost far less than hashing the state."""

    # the submodules (the root is the memo's weak key: a strong reference would keep it alive), held
    # strongly, as the tensors are, so that no id compared below is reused while the entry lives
    submodules: tuple[Any, ...]
    classes: tuple[type, ...]
    attributes: tuple[tuple[tuple[str, ...], tuple[Any, ...]] | None, ...]  # None: a plain layer
    tensors: tuple[Any, ...]
    present: tuple[Any, ...]  # the tensors that are not None, in order
    layouts: tuple[tuple[Any, ...], ...]
    views: tuple[np.ndarray, ...]
    values: tuple[bytes, ...]

    @classmethod
    def take(cls, modules: list[Any]) -> _Snapshot | None:
        """The snapshot of a module's tree (:func:`_modules_of`) now, or None where the check does not
        apply (a tensor off the CPU or not strided, or one numpy cannot view): such a module is hashed
        again on every call."""
        import torch

        tensors = _tensors_of(modules)
        present = [t for t in tensors if t is not None]
        plain = _plain_layers()
        try:
            if any(t.device.type != "cpu" or t.layout != torch.strided for t in present):
                return None
            views = tuple(t.detach().numpy() for t in present)
        except (RuntimeError, TypeError):  # e.g. a tensor with its conjugate or negative bit set
            return None
        return cls(
            submodules=tuple(modules[1:]),
            classes=tuple(type(m) for m in modules),
            attributes=tuple(None if type(m) in plain else (tuple(vars(m)), tuple(vars(m).values()))
                             for m in modules),
            tensors=tuple(tensors),
            present=tuple(present),
            layouts=tuple(_layout(t) for t in present),
            views=views,
            values=tuple(v.tobytes() for v in views),
        )

    def matches(self, modules: list[Any]) -> bool:
        """Whether the tree ``modules`` (:func:`_modules_of` of the module this was taken of) is exactly
        as when this was taken."""
        if len(modules) != len(self.classes) or not all(map(operator.is_, modules[1:], self.submodules)):
            return False
        if not all(map(operator.is_, map(type, modules), self.classes)):
            return False
        for m, attributes in zip(modules, self.attributes, strict=True):
            if attributes is None:  # an exact Linear, ReLU, Identity or Sequential: its tensors and
                continue  # children (checked here) are all its forward reads
            keys, values = attributes
            now = vars(m)
            if len(now) != len(keys) or not all(map(operator.is_, now, keys)) or not all(
                map(operator.is_, now.values(), values)
            ):
                return False
        expected = iter(self.tensors)
        for m in modules:
            for d in (m._parameters, m._buffers):
                for t in d.values():
                    if t is not next(expected, _MISSING):
                        return False
        if next(expected, _MISSING) is not _MISSING:
            return False
        rows = zip(self.present, self.layouts, self.views, self.values, strict=True)
        for t, (ptr, dtype, shape, stride), view, value in rows:
            if t.data_ptr() != ptr or t.dtype != dtype or t.shape != shape or t.stride() != stride:
                return False
            if view.tobytes() != value:
                return False
        return True


_MISSING = object()


class _ParseMemo:
    """Parsed networks per live torch module, each with the :class:`_Snapshot` of the module it was
    parsed from; an entry serves a call only when the module still matches its snapshot."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._memo: weakref.WeakKeyDictionary[Any, tuple[_Snapshot | None, ReluNetwork]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, module: Any) -> tuple[_Snapshot | None, ReluNetwork] | None:
        with self._lock:
            return self._memo.get(module)

    def put(self, module: Any, snapshot: _Snapshot | None, net: ReluNetwork) -> None:
        with self._lock:
            self._memo[module] = (snapshot, net)


_MEMO = _ParseMemo()


def model_hash(module: Any) -> str:
    """Stable hash of a torch module: its structure (``repr``) and every state_dict tensor in order
    (name, dtype, shape, bytes). A ``ReluNetwork`` returns its own digest."""
    if isinstance(module, ReluNetwork):
        return module.digest
    import torch

    h = hashlib.sha256(b"privcore.model_hash.v1\0")
    h.update(repr(module).encode())
    for name, t in module.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"\0{name}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def as_network(net: Any) -> ReluNetwork:
    """Return ``net`` as a :class:`ReluNetwork`, parsing a torch module if needed. Memoised per
    module: hashed and parsed again whenever its structure or parameters change, which an exact check
    of its state (:class:`_Snapshot`: identities, attributes, every tensor's bytes) tells at a fraction
    of the hash's cost; a module off the CPU is hashed on every call."""
    if isinstance(net, ReluNetwork):
        return net
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is pinned
        raise UnsupportedNetworkError("net must be a ReluNetwork or a torch module") from exc
    if not isinstance(net, torch.nn.Module):
        raise UnsupportedNetworkError(
            f"net must be a torch.nn.Module made of Linear and ReLU layers, got {type(net).__name__}"
        )
    modules = _modules_of(net)
    _refuse_hooks(net, modules)  # checked on every call: hooks are not part of the digest
    entry = _MEMO.get(net)
    if entry is not None and entry[0] is not None and entry[0].matches(modules):
        return entry[1]  # the very state it was hashed and parsed from: same digest, same weights
    snapshot = _Snapshot.take(modules)  # before hashing: a change from here on fails the match below
    digest = model_hash(net)
    if entry is not None and entry[1].digest == digest:
        parsed = entry[1]
    else:
        parsed = _parse_module(net, digest)
    if snapshot is not None and not snapshot.matches(_modules_of(net)):
        snapshot = None  # changed while hashed or parsed: this entry serves no later call
    _MEMO.put(net, snapshot, parsed)
    return parsed


def _refuse_hooks(net: Any, modules: list[Any]) -> None:
    """Forward hooks and a ``forward`` assigned on an instance can change what a module computes
    where the equivalence check never probes, and neither the chain reader nor torch.fx sees them:
    refuse them on ``net`` or any submodule (``modules``, :func:`_modules_of`), and global hooks
    (``register_module_forward_hook``)."""
    from torch.nn.modules import module as torch_module

    if getattr(torch_module, "_global_forward_hooks", None) or getattr(
        torch_module, "_global_forward_pre_hooks", None
    ):
        raise UnsupportedNetworkError(
            "a global torch forward hook is registered; it could change what the network computes, "
            "so its Lipschitz constant cannot be certified (remove the hook first)"
        )
    if not any("forward" in vars(sub) or getattr(sub, "_forward_hooks", None)
               or getattr(sub, "_forward_pre_hooks", None) for sub in modules):
        return
    for name, sub in net.named_modules():  # one is there: find its name for the message
        if "forward" in vars(sub):  # torch.fx traces type(sub).forward and never sees this one
            raise UnsupportedNetworkError(
                f"layer {name or '<root>'!r} ({type(sub).__name__}) has a forward set on the instance; "
                "it cannot be parsed, so its Lipschitz constant cannot be certified"
            )
        if getattr(sub, "_forward_hooks", None) or getattr(sub, "_forward_pre_hooks", None):
            raise UnsupportedNetworkError(
                f"layer {name or '<root>'!r} ({type(sub).__name__}) has a forward hook; hooks can change "
                "what the network computes, so its Lipschitz constant cannot be certified "
                "(remove the hook first)"
            )


def _affine_op(sub: Any) -> tuple[str, Any]:
    w = sub.weight.detach().cpu().double().numpy()
    b = sub.bias.detach().cpu().double().numpy() if sub.bias is not None else np.zeros(w.shape[0])
    return ("affine", (w, b))


def _sequential_ops(module: Any) -> list[tuple[str, Any]] | None:
    """The ops of a plain (possibly nested) ``nn.Sequential`` of Linear/ReLU/Identity layers, read
    from its children; None for anything else, which then goes through torch.fx. Plain chains are
    read without fx because tracing patches ``nn.Module.__call__`` process-wide while it runs,
    which breaks module calls in other threads (the dashboard's)."""
    import torch

    # exact types' own forward only: a subclass may override forward (fx traces into it and refuses
    # what it cannot model; reading its weights here would certify a map it does not compute)
    if isinstance(module, torch.nn.Linear) and type(module).forward is torch.nn.Linear.forward:
        return [_affine_op(module)]
    if isinstance(module, torch.nn.ReLU) and type(module).forward is torch.nn.ReLU.forward:
        return [("relu", None)]
    if isinstance(module, torch.nn.Identity) and type(module).forward is torch.nn.Identity.forward:
        return []
    if type(module) is not torch.nn.Sequential:  # a subclass may override forward
        return None
    ops: list[tuple[str, Any]] = []
    for child in module:
        sub = _sequential_ops(child)
        if sub is None:
            return None
        ops.extend(sub)
    return ops


def _parse_module(module: Any, digest: str) -> ReluNetwork:
    import torch
    import torch.fx as fx
    import torch.nn.functional as F

    relu_functions = {torch.relu, F.relu, torch.relu_, torch.nn.functional.relu}
    plain = _sequential_ops(module)
    if plain is not None:
        return _finish_parse(module, plain, digest)
    try:
        graph = fx.symbolic_trace(module).graph
    except Exception as exc:
        raise UnsupportedNetworkError(
            f"cannot trace {type(module).__name__} into a chain of Linear/ReLU layers ({exc}); "
            "LipMIP supports only fully connected ReLU networks"
        ) from exc
    ops: list[tuple[str, Any]] = []  # ("affine", (W, b)) or ("relu", None)
    previous = None
    for node in graph.nodes:
        if node.op == "placeholder":
            if previous is not None:
                raise UnsupportedNetworkError("the network must take exactly one input tensor")
            previous = node
            continue
        if node.op == "output":
            if node.args[0] is not previous:
                raise UnsupportedNetworkError("the network's output must be the last layer's output")
            break
        if len(node.args) < 1 or node.args[0] is not previous or any(
            isinstance(a, fx.Node) for a in (*node.args[1:], *node.kwargs.values())
        ):
            raise UnsupportedNetworkError(
                f"operation {node.format_node()} is not part of a single Linear/ReLU chain "
                "(skip connections and multi-input operations are not supported by LipMIP)"
            )
        if node.op == "call_module":
            sub = module.get_submodule(node.target)
            if isinstance(sub, torch.nn.Linear):
                ops.append(_affine_op(sub))
            elif isinstance(sub, torch.nn.ReLU):
                ops.append(("relu", None))
            elif isinstance(sub, torch.nn.Identity):
                pass
            else:
                raise UnsupportedNetworkError(
                    f"layer {node.target!r} is {type(sub).__name__}; LipMIP supports only "
                    "torch.nn.Linear and torch.nn.ReLU (and Identity)"
                )
        elif node.op == "call_function" and node.target in relu_functions:
            ops.append(("relu", None))
        elif node.op == "call_method" and node.target in ("relu", "relu_"):
            ops.append(("relu", None))
        else:
            raise UnsupportedNetworkError(
                f"operation {node.format_node()} is not supported; LipMIP supports only "
                "Linear layers and ReLU activations"
            )
        previous = node
    return _finish_parse(module, ops, digest)


def _finish_parse(module: Any, ops: list[tuple[str, Any]], digest: str) -> ReluNetwork:
    weights, biases = _normalise(ops, type(module).__name__)
    parsed = ReluNetwork.from_arrays(weights, biases, digest=digest)
    _check_equivalent(module, parsed)
    return parsed


def _normalise(ops: list[tuple[str, Any]], name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Compose consecutive affine maps and collapse repeated ReLUs into A_L∘σ∘…∘σ∘A_1."""
    weights: list[np.ndarray] = []
    biases: list[np.ndarray] = []
    pending_relu = False
    for kind, payload in ops:
        if kind == "relu":
            if not weights:
                raise UnsupportedNetworkError(f"{name}: a ReLU before the first Linear layer is unsupported")
            pending_relu = True
            continue
        w, b = payload
        if weights and not pending_relu:  # two affine maps in a row: compose
            weights[-1], biases[-1] = w @ weights[-1], w @ biases[-1] + b
        else:
            weights.append(np.asarray(w, dtype=np.float64))
            biases.append(np.asarray(b, dtype=np.float64))
        pending_relu = False
    if not weights:
        raise UnsupportedNetworkError(f"{name} contains no Linear layer")
    if pending_relu:  # ReLU on the output: identity output layer after it
        m = weights[-1].shape[0]
        weights.append(np.eye(m))
        biases.append(np.zeros(m))
    return weights, biases


def _check_equivalent(module: Any, parsed: ReluNetwork) -> None:
    """Refuse a parse that does not reproduce the module's outputs (defence in depth)."""
    import torch

    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, parsed.in_dim))
    try:
        p = next(module.parameters())
        dtype, device = p.dtype, p.device
    except StopIteration:  # pragma: no cover - parse needs a Linear layer
        dtype, device = torch.float32, torch.device("cpu")
    with torch.no_grad():
        y = module(torch.as_tensor(x, dtype=dtype, device=device)).double().cpu().numpy()
    ours = parsed.forward(x)
    eps = 1e-4 if dtype != torch.float64 else 1e-9
    if y.shape != ours.shape or not np.allclose(y, ours, rtol=eps, atol=eps * (1 + np.abs(ours).max())):
        raise UnsupportedNetworkError(
            f"net ({type(module).__name__}): parsed Linear/ReLU chain does not reproduce the module's "
            "output; its forward() does something LipMIP cannot model"
        )
