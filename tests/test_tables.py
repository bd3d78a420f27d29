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


def test_only_material_decode_notes_are_warnings() -> None:
    from privlens.upload import material_note

    assert material_note("the image has transparency: it was composited over the dataset's background 0.")
    assert material_note("inverted (v ↦ 1 − v).")
    assert material_note("colour converted to grey (ITU-R BT.601 luma) for this grey-scale dataset.")
    assert material_note("padded from 1×40000 to a 40000×40000 square with the background (no stretching).")
    assert not material_note("padded from 200×180 to a 200×200 square with the background (no stretching).")
    assert not material_note("resized from 200×200 to 28×28, the model's input size.")
    assert not material_note("16-bit grey PNG read at full precision (value / 65535).")
