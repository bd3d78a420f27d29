"""Loss functions of the obfuscator recipes (posthoc-PTR paper, Sec. 5 and App. E)."""

from __future__ import annotations

import torch

__all__ = ["contrastive_loss"]


def contrastive_loss(z_tilde: torch.Tensor, labels: torch.Tensor, *, margin: float) -> torch.Tensor:
    """Siamese contrastive regulariser of Osia et al. (2020) ("C" in Table 1) over all pairs
    i ≠ j of a batch: ``d_ij`` for pairs with the same label, ``max(0, margin − d_ij)`` for
    pairs with different labels, averaged; ``d`` is the ℓ2 distance between obfuscated vectors.
    (The authors' public code applied it to the embedder output z, which does not depend on the
    obfuscator; here it acts on z̃ = f(z) as the paper describes.)"""
    n = z_tilde.shape[0]
    if n < 2:
        return z_tilde.sum() * 0.0
    # pairwise squared distances from the Gram matrix (one matmul; no (n, n, d) tensor)
    sq = z_tilde.pow(2).sum(1)
    d2 = (sq.unsqueeze(0) + sq.unsqueeze(1) - 2.0 * z_tilde @ z_tilde.T).clamp_min(0.0)
    d = torch.sqrt(d2 + 1e-12)  # smooth at d = 0 (the diagonal)
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    per_pair = torch.where(same, d, torch.relu(margin - d))
    off = 1.0 - torch.eye(n, dtype=z_tilde.dtype, device=z_tilde.device)
    return (per_pair * off).sum() / (n * (n - 1))
