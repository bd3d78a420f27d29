"""The pages' tables as text (privlens.tables): no raw None in a cell."""

from __future__ import annotations

import math

from privlens.tables import ATTACK_LEGEND, NOTHING, attack_table


def test_attack_table_shows_a_dash_not_none_for_nothing_released() -> None:
    table = attack_table([
        {"epsilon": "no release (baseline)", "released": False, "ssim": 0.1234, "psnr": 9.87},
        {"epsilon": 1.0, "released": False, "ssim": None, "psnr": None},
        {"epsilon": 2.0, "released": True, "ssim": 0.5, "psnr": 15.04},
        {"epsilon": math.inf, "released": True, "ssim": 0.9, "psnr": 21.0},
    ])
    assert list(table["ε"]) == ["no release (baseline)", "1", "2", "∞"]
    assert list(table["released"]) == ["—", "⊥", "yes", "yes"]
    assert list(table["SSIM"]) == ["0.123", NOTHING, "0.500", "0.900"]
    assert list(table["PSNR (dB)"]) == ["9.9", NOTHING, "15.0", "21.0"]
    assert "None" not in table.to_string() and "nan" not in table.to_string()
    assert "⊥" in ATTACK_LEGEND and NOTHING in ATTACK_LEGEND
