"""Trainable Lipschitz networks of the mechanism lab (Shavit & Gjura 2019, Secs. 2 and 4.2).

* :class:`LaplaceNet` — f: [low, high]^n → ℝ, a two-layer ReLU network (100 hidden units)
  of ℓ1 column-norm layers, k-Lipschitz from ℓ1 to |·| (Sec. 2.1, 4.2).
* :class:`UtilityNet` — u(x, r) = G_c([G_d(x), G_r(r)]) (Sec. 2.2, Fig. 3): G_d a two-layer
  k-Lipschitz ℓ1 network, G_r a one-layer ReLU network of the response, G_c a two-layer
  network that is 1-Lipschitz in its G_d-part. The paper makes all of G_c 1-Lipschitz;
  only the columns that read z_d = G_d(x) matter for the sensitivity in x ("no such
  requirement exists for r"), so the columns reading z_r = G_r(r) are left free. For every
  fixed r, |u(x, r) − u(x', r)| ≤ 1·1·k·‖x − x'‖₁.

Both centre the data at the domain midpoint (an input shift, which changes no Lipschitz
constant) and bake into plain float32 arrays (:meth:`bake`) from which the mechanisms of
:mod:`privcore.lab.mechanisms` are built; the releases use exactly those arrays.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from privcore.lab.data import DEFAULT_DOMAIN, DataDomain
from privcore.nets.lipschitz_layers import L1LipschitzLinear, LipschitzMLP
from privcore.validation import check_int, check_positive

__all__ = ["LaplaceNet", "UtilityNet"]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float32, copy=True)


class LaplaceNet(nn.Module):
    """f(x) = MLP(x − centre), a k-Lipschitz (ℓ1 → |·|) ReLU network (Shavit & Gjura Sec. 2.1)."""

    def __init__(self, *, k: float, domain: DataDomain = DEFAULT_DOMAIN, hidden: int = 100,
                 depth: int = 2, output_shift: float = 0.0) -> None:
        super().__init__()
        self.k = check_positive("k", k)
        self.domain = domain
        hidden = check_int("hidden", hidden, minimum=1)
        depth = check_int("depth", depth, minimum=1)
        sizes = (domain.n, *([hidden] * (depth - 1)), 1)
        self.mlp = LipschitzMLP(sizes, bound=self.k, norm="l1")
        with torch.no_grad():  # start at a sensible answer (e.g. the mean query's average)
            self.mlp.layers[-1].bias.fill_(float(output_shift))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """f(x) for a batch ``(B, n)`` → ``(B,)``."""
        return self.mlp(x - self.domain.center).squeeze(-1)

    def lipschitz_bound(self) -> float:
        """Certified ℓ1 → |·| bound (≤ k by construction)."""
        return self.mlp.lipschitz_bound(1)

    @torch.no_grad()
    def bake(self) -> dict[str, np.ndarray]:
        """Float32 arrays ``w0, b0, w1, b1, …`` with the centring folded into the first bias."""
        seq = self.mlp.to_sequential()
        linears = [m for m in seq if isinstance(m, nn.Linear)]
        out: dict[str, np.ndarray] = {}
        for i, lin in enumerate(linears):
            b = lin.bias
            if i == 0:
                b = b - lin.weight.sum(dim=1) * self.domain.center
            out[f"w{i}"] = _np(lin.weight)
            out[f"b{i}"] = _np(b)
        return out


class UtilityNet(nn.Module):
    """u(x, r) = G_c([G_d(x), G_r(r)]) (Shavit & Gjura Sec. 2.2 / 4.2, Fig. 3), k-Lipschitz in x."""

    def __init__(self, *, k: float, responses: np.ndarray, domain: DataDomain = DEFAULT_DOMAIN,
                 hidden: int = 100, latent: int = 32) -> None:
        super().__init__()
        self.k = check_positive("k", k)
        self.domain = domain
        hidden = check_int("hidden", hidden, minimum=1)
        latent = check_int("latent", latent, minimum=1)
        resp = np.asarray(responses, dtype=np.float64)
        lo, hi = float(resp.min()), float(resp.max())
        self.register_buffer("responses", torch.as_tensor(resp, dtype=torch.float32))
        self._grid = resp.copy()  # the exact float64 grid, recorded by bake()
        # Responses are scaled to [-1, 1] before G_r (no Lipschitz requirement in r).
        self.r_center = (lo + hi) / 2.0
        self.r_scale = max((hi - lo) / 2.0, 1e-12)
        self.g_d = LipschitzMLP((domain.n, hidden, latent), bound=self.k, norm="l1")
        self.g_r = nn.Linear(1, latent)
        self.c_data = L1LipschitzLinear(latent, hidden, bound=1.0)
        self.c_resp = nn.Linear(latent, hidden, bias=False)
        self.c_out = L1LipschitzLinear(hidden, 1, bound=1.0)

    def _z_r(self) -> torch.Tensor:
        r = ((self.responses - self.r_center) / self.r_scale).unsqueeze(1)
        return torch.relu(self.g_r(r))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Utilities for a batch ``(B, n)`` against every response: ``(B, R)``."""
        z_d = self.g_d(x - self.domain.center)  # (B, latent)
        a = self.c_data(z_d)  # (B, hidden), includes the bias
        c = self.c_resp(self._z_r())  # (R, hidden)
        h = torch.relu(a.unsqueeze(1) + c.unsqueeze(0))
        return self.c_out(h).squeeze(-1)

    def lipschitz_bound(self) -> float:
        """Certified ℓ1 → |·| bound in x for every fixed r: ‖G_d‖·‖c_data‖·‖c_out‖ ≤ k·1·1."""
        return LipschitzMLP._product(
            [self.g_d.lipschitz_bound(1), self.c_data.lipschitz_bound(1), self.c_out.lipschitz_bound(1)]
        )

    @torch.no_grad()
    def bake(self) -> dict[str, np.ndarray]:
        """Float32 arrays: G_d (``d0, e0, d1, e1``; centring folded), the head ``a`` (c_data
        weight), per-response biases ``c`` (R × hidden: c_data bias + c_resp·G_r(r)), and
        the output layer ``w``, ``v``; plus the ``responses``."""
        seq = self.g_d.to_sequential()
        lin0, lin1 = (m for m in seq if isinstance(m, nn.Linear))
        head = self.c_data.to_linear()
        out_lin = self.c_out.to_linear()
        c = head.bias.unsqueeze(0) + self.c_resp(self._z_r())
        return {
            "d0": _np(lin0.weight),
            "e0": _np(lin0.bias - lin0.weight.sum(dim=1) * self.domain.center),
            "d1": _np(lin1.weight),
            "e1": _np(lin1.bias),
            "a": _np(head.weight),
            "c": _np(c),
            "w": _np(out_lin.weight),
            "v": _np(out_lin.bias),
            "responses": self._grid.copy(),
        }
