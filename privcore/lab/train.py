"""Training learned mechanisms by their expected response loss (Shavit & Gjura 2019, Sec. 4.2).

The loss of a minibatch of 32 datasets (drawn from 10⁴ pre-drawn training datasets) is the
exact expected response loss over the mechanism's randomness (closed forms in
:mod:`privcore.lab.queries`), minimised with Adam. The Laplace scale k·c/ε and the
exponential temperature 2·k·c/ε are fixed during training, exactly as at release.

Re-initialisation trick (Sec. 4.2: "if the loss did not improve after the first epoch, we
reinitialized"). "Improve" is read as "beat the best data-independent mechanism of the same
family": after the first epoch the exact ERL on a fixed evaluation subset of the training
data is compared with that of the best constant answer (plus the same Laplace noise for the
Laplace family, a point mass for the exponential family); a network that does not beat it
has not learned to use the data and is re-initialised with a fresh seed, at most
``max_restarts`` times. The attempt with the best first-epoch ERL is then trained on.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from privcore.lab.data import DEFAULT_DOMAIN, DataDomain, TruncatedGaussianMixture
from privcore.lab.mechanisms import (
    LearnedExponentialMechanism,
    LearnedLaplaceMechanism,
    fit_data_blind,
)
from privcore.lab.models import LaplaceNet, UtilityNet
from privcore.lab.queries import (
    LOSSES,
    QUERIES,
    default_loss,
    laplace_erl,
    loss_matrix,
    query_spec,
    query_values,
)
from privcore.validation import check_choice, check_epsilon, check_int, check_positive

__all__ = ["MECHANISMS", "LabConfig", "TrainResult", "resolve_device", "train_data", "train_mechanism"]

MECHANISMS: tuple[str, ...] = ("laplace", "exponential")
Progress = Callable[[int, int, str], None]


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``cuda`` when present (or asked for), else ``cpu``; the same code path on both."""
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(device)!r} needs CUDA, which is not available; use 'cpu' or 'auto'")
    return dev


@dataclass(frozen=True, kw_only=True)
class LabConfig:
    """Everything that defines one trained lab mechanism (recorded on its card)."""

    mechanism: str
    query: str
    k: float
    epsilon: float = 1.0
    loss: str = ""  # "" → default_loss(mechanism, query)
    domain: DataDomain = DEFAULT_DOMAIN
    train_components: int = 4
    num_train: int = 10_000
    batch_size: int = 32
    epochs: int = 10
    lr: float = 0.0  # 0 → 1e-3 (Laplace) or 1e-2 (exponential: its utilities must grow to ~2kc/ε)
    hidden: int = 100
    latent: int = 32
    n_responses: int = 50
    sort_input: bool = True
    max_restarts: int = 3
    seed: int = 0
    data_seed: int = 0

    def __post_init__(self) -> None:
        check_choice("mechanism", self.mechanism, MECHANISMS)
        check_choice("query", self.query, QUERIES)
        check_positive("k", self.k)
        check_epsilon(self.epsilon)
        if self.loss == "":
            object.__setattr__(self, "loss", default_loss(self.mechanism, self.query))
        check_choice("loss", self.loss, LOSSES)
        sizes = ("train_components", "num_train", "batch_size", "epochs", "hidden", "latent", "n_responses")
        for name in sizes:
            check_int(name, getattr(self, name), minimum=1)
        check_int("max_restarts", self.max_restarts, minimum=0)
        check_int("seed", self.seed, minimum=0)
        check_int("data_seed", self.data_seed, minimum=0)
        if self.lr == 0.0:
            object.__setattr__(self, "lr", 1e-3 if self.mechanism == "laplace" else 1e-2)
        check_positive("lr", self.lr)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return asdict(self)

    @property
    def distribution(self) -> TruncatedGaussianMixture:
        """The training distribution over datasets (Sec. 4.1)."""
        return TruncatedGaussianMixture(n_components=self.train_components, domain=self.domain)


@dataclass(frozen=True, kw_only=True, eq=False)
class TrainResult:
    """A trained, baked mechanism with its training record."""

    mechanism: LearnedLaplaceMechanism | LearnedExponentialMechanism
    config: LabConfig
    history: tuple[float, ...]
    blind_erl: float
    restarts: int
    seconds: float
    device: str
    extras: dict[str, object] = field(default_factory=dict)


@functools.lru_cache(maxsize=8)
def train_data(distribution: TruncatedGaussianMixture, num: int, seed: int) -> np.ndarray:
    """The pre-drawn training datasets (cached per process; read-only)."""
    x = distribution.sample(num, seed=seed)
    x.setflags(write=False)
    return x


def _build(config: LabConfig, seed: int, init_value: float, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(seed)
    if config.mechanism == "laplace":
        net: torch.nn.Module = LaplaceNet(k=config.k, domain=config.domain, hidden=config.hidden,
                                          output_shift=init_value)
    else:
        grid = query_spec(config.query, config.domain).grid(config.n_responses)
        net = UtilityNet(k=config.k, responses=grid, domain=config.domain, hidden=config.hidden,
                         latent=config.latent)
    return net.to(device)


def train_mechanism(
    config: LabConfig,
    *,
    device: str | torch.device | None = None,
    progress: Progress | None = None,
) -> TrainResult:
    """Train one learned mechanism by its expected response loss (Shavit & Gjura Sec. 4.2)."""
    start = time.perf_counter()
    dev = resolve_device(device)
    dom = config.domain
    raw = train_data(config.distribution, config.num_train, config.data_seed)
    truth_np = np.asarray(query_values(config.query, raw))
    inputs_np = np.sort(raw, axis=1) if config.sort_input else raw
    x_all = torch.as_tensor(inputs_np, dtype=torch.float32, device=dev)
    raw_all = torch.tensor(raw, dtype=torch.float32, device=dev)
    q_all = torch.as_tensor(truth_np, dtype=torch.float32, device=dev)
    spec = query_spec(config.query, dom)
    grid = spec.grid(config.n_responses)
    is_laplace = config.mechanism == "laplace"
    scale = config.k * dom.width / config.epsilon  # Laplace scale k·c/ε
    temperature = 2.0 * config.k * dom.width / config.epsilon  # exponential: exp(u / (2kc/ε))

    blind = fit_data_blind(config.query, config.loss, raw,
                           candidates=spec.grid(1001 if is_laplace else config.n_responses), domain=dom)
    n_eval = min(1024, config.num_train)
    if is_laplace:
        loc = torch.full((n_eval,), blind.value, dtype=torch.float32, device=dev)
        blind_erl = float(laplace_erl(config.loss, raw_all[:n_eval], q_all[:n_eval], loc, scale).mean())
        lmat_all = None
    else:
        blind_erl = float(blind.expected_loss(raw[:n_eval], config.loss).mean())
        grid_t = torch.as_tensor(grid, dtype=torch.float32, device=dev)
        lmat_all = loss_matrix(config.loss, raw_all, q_all, grid_t)  # (N, R), fixed

    def batch_erl(net: torch.nn.Module, idx: torch.Tensor | slice) -> torch.Tensor:
        if is_laplace:
            return laplace_erl(config.loss, raw_all[idx], q_all[idx], net(x_all[idx]), scale)
        probs = torch.softmax(net(x_all[idx]) / temperature, dim=1)
        return (lmat_all[idx] * probs).sum(dim=1)  # type: ignore[index]

    def eval_erl(net: torch.nn.Module) -> float:
        with torch.no_grad():
            return float(batch_erl(net, slice(0, n_eval)).mean())

    steps_per_epoch = -(-config.num_train // config.batch_size)
    total = steps_per_epoch * (config.epochs + config.max_restarts)
    done = 0
    gen = torch.Generator(device="cpu").manual_seed(config.seed)

    def run_epoch(net: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
        nonlocal done
        perm = torch.randperm(config.num_train, generator=gen).to(dev)
        for s in range(steps_per_epoch):
            idx = perm[s * config.batch_size:(s + 1) * config.batch_size]
            loss = batch_erl(net, idx).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            done += 1
            if progress is not None and (done % 50 == 0 or s == steps_per_epoch - 1):
                what = f"{config.mechanism}/{config.query} k={config.k:g}"
                progress(done, total, f"{what} loss={loss.item():.4g}")

    init_value = float(truth_np.mean())
    attempts: list[tuple[float, torch.nn.Module, torch.optim.Optimizer]] = []
    for attempt in range(config.max_restarts + 1):
        net = _build(config, config.seed + 7919 * attempt, init_value, dev)
        opt = torch.optim.Adam(net.parameters(), lr=config.lr)
        run_epoch(net, opt)
        erl = eval_erl(net)
        attempts.append((erl, net, opt))
        if erl < blind_erl * (1.0 - 1e-3):
            break
    restarts = len(attempts) - 1
    first_erl, net, opt = min(attempts, key=lambda a: a[0])
    history = [first_erl]
    total = done + steps_per_epoch * (config.epochs - 1)
    for _ in range(config.epochs - 1):
        run_epoch(net, opt)
        history.append(eval_erl(net))
    if progress is not None:
        progress(total, total, "done")

    net = net.cpu().eval()
    baked = net.bake()  # type: ignore[operator]
    if is_laplace:
        n_layers = len([key for key in baked if key.startswith("w")])
        mech: LearnedLaplaceMechanism | LearnedExponentialMechanism = LearnedLaplaceMechanism(
            query=config.query, epsilon=config.epsilon, k=config.k, domain=dom, sort_input=config.sort_input,
            weights=tuple(baked[f"w{i}"] for i in range(n_layers)),
            biases=tuple(baked[f"b{i}"] for i in range(n_layers)),
        )
    else:
        mech = LearnedExponentialMechanism(query=config.query, epsilon=config.epsilon, k=config.k, domain=dom,
                                           sort_input=config.sort_input, arrays=baked)
    return TrainResult(mechanism=mech, config=config, history=tuple(history), blind_erl=blind_erl,
                       restarts=restarts, seconds=time.perf_counter() - start, device=str(dev),
                       extras={"blind_value": blind.value})
