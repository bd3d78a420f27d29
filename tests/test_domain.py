"""privcore.domain: blank images and inputs beyond the held-out data's 99.9th percentiles."""

from __future__ import annotations

import pytest
import torch

from privcore.domain import DomainProfile, blank_reason


def test_blank_reason_flags_near_constant_images_only() -> None:
    assert "nearly uniform" in blank_reason(torch.zeros(1, 8, 8))
    assert blank_reason(torch.full((1, 8, 8), 0.7) + 0.001 * torch.rand(1, 8, 8)) is not None
    x = torch.zeros(1, 8, 8)
    x[0, 2:6, 3:5] = 1.0
    assert blank_reason(x) is None


def test_profile_thresholds_are_the_held_out_quantiles_and_check_names_what_is_exceeded() -> None:
    gen = torch.Generator().manual_seed(0)
    train = torch.rand(500, 1, 4, 4, generator=gen) * 0.5
    held_out = torch.rand(400, 1, 4, 4, generator=gen) * 0.5

    def embed(x: torch.Tensor) -> torch.Tensor:  # mean and max pixel: a 2-d "embedding"
        flat = x.flatten(1)
        return torch.stack([flat.mean(1), flat.amax(1)], dim=1)

    def decode(z: torch.Tensor) -> torch.Tensor:  # a flat image at the mean
        return z[:, :1, None, None].expand(-1, 1, 4, 4)

    p = DomainProfile.from_data(train=train, held_out=held_out, embed=embed, decode=decode, quantile=0.999)
    errs = [p.scores(x, embed(x[None])[0], decode(embed(x[None])))[0] for x in held_out]
    assert sum(e > p.recon_threshold for e in errs) <= 1  # at most 0.1 % of 400 beyond
    assert p.recon_threshold == pytest.approx(torch.quantile(torch.tensor(errs, dtype=torch.float64), 0.999))
    like = held_out[0]
    assert p.check(like, embed(like[None])[0], decode(embed(like[None]))) == []
    odd = torch.zeros(1, 4, 4)
    odd[0, ::2, ::2] = 1.0  # high contrast, bright: far from data in [0, 0.5]
    reasons = p.check(odd, embed(odd[None])[0], decode(embed(odd[None])))
    assert len(reasons) == 2
    assert "reconstructs it poorly" in reasons[0] and "far from the training" in reasons[1]
    with pytest.raises(ValueError, match="quantile"):
        DomainProfile.from_data(train=train, held_out=held_out, embed=embed, decode=decode, quantile=1.5)
