"""Readers for the on-disk dataset formats (IDX, CIFAR-10 pickles, image-folder trees) and their
md5-checked downloads, in numpy and Pillow only.

They replace torchvision's dataset classes, whose compiled operators do not load beside a CPU-only
torch build from PyPI (``operator torchvision::nms does not exist``); the formats are the same as
torchvision's (LeCun et al.'s IDX files; Krizhevsky's ``cifar-10-batches-py`` pickles; one
sub-folder per class, sorted), so a torchvision root works unchanged.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import pickle
import tarfile
import tempfile
import urllib.request
from pathlib import Path

import numpy as np

from privcore.errors import DatasetUnavailableError

__all__ = [
    "CIFAR10_BATCHES",
    "IMAGE_EXTENSIONS",
    "download_checked",
    "read_cifar10",
    "read_idx",
    "read_image_folder",
]

#: IDX element types (the third byte of the magic number).
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}

#: CIFAR-10 pickles and their md5 (as published with the archive and checked by torchvision).
CIFAR10_BATCHES = {
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
    "batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
}
CIFAR10_URL = ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a")
MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
MNIST_MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}

#: File endings read as images in a folder tree (torchvision's ``IMG_EXTENSIONS``).
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def read_idx(path: Path) -> np.ndarray:
    """One IDX file (plain or ``.gz``) as an array of its declared type and shape."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise DatasetUnavailableError(f"{path} is not an IDX file (magic {data[:4].hex()})")
    ndim = data[3]
    shape = tuple(int(v) for v in np.frombuffer(data, ">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    offset = 4 + 4 * ndim
    expected = offset + int(np.prod(shape)) * dtype.itemsize
    if len(data) != expected:
        raise DatasetUnavailableError(f"{path} holds {len(data)} bytes, its header promises {expected}")
    return np.frombuffer(data, dtype, offset=offset).reshape(shape).astype(dtype.newbyteorder("="))


def _md5(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_cifar10(folder: Path) -> tuple[np.ndarray, list[int], np.ndarray, list[int], list[str]]:
    """``cifar-10-batches-py``: (x_train NHWC uint8, y_train, x_test, y_test, class names), every
    pickle md5-checked first (the pickles are only unpickled once they match the published files)."""
    for name, md5 in CIFAR10_BATCHES.items():
        p = folder / name
        if not p.is_file() or _md5(p) != md5:
            raise DatasetUnavailableError(f"{p} is missing or corrupt (md5 differs from the published file)")

    def load(name: str) -> dict:
        with open(folder / name, "rb") as f:
            return pickle.load(f, encoding="latin1")  # md5-checked above

    def batch(names: list[str]) -> tuple[np.ndarray, list[int]]:
        parts = [load(n) for n in names]
        x = np.concatenate([np.asarray(p["data"], dtype=np.uint8) for p in parts])
        y = [int(v) for p in parts for v in p.get("labels", p.get("fine_labels", []))]
        return x.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), y

    xtr, ytr = batch([f"data_batch_{i}" for i in range(1, 6)])
    xte, yte = batch(["test_batch"])
    return xtr, ytr, xte, yte, list(load("batches.meta")["label_names"])


def read_image_folder(path: Path, *, size: int, grayscale: bool) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A tree with one sub-folder per class (sorted names → labels 0, 1, …): images resized to
    ``size``² bilinearly, as (N, C, H, W) uint8, labels and class names."""
    from PIL import Image

    classes = sorted(e.name for e in os.scandir(path) if e.is_dir())
    if not classes:
        raise DatasetUnavailableError(f"no class sub-folder in {path}")
    xs, ys = [], []
    for label, name in enumerate(classes):
        files = sorted(
            Path(r) / f
            for r, _, fs in os.walk(path / name, followlinks=True)
            for f in fs
            if f.lower().endswith(IMAGE_EXTENSIONS)
        )
        if not files:
            exts = ", ".join(IMAGE_EXTENSIONS)
            raise DatasetUnavailableError(f"class folder {path / name} holds no image ({exts})")
        for f in files:
            with Image.open(f) as im:
                im = im.convert("L" if grayscale else "RGB").resize((size, size), Image.Resampling.BILINEAR)
                a = np.asarray(im, dtype=np.uint8)
            xs.append(a[None] if grayscale else a.transpose(2, 0, 1))
            ys.append(label)
    return np.stack(xs), np.asarray(ys), classes


def download_checked(url: str, md5: str, dest: Path, *, timeout: float = 60.0) -> Path:
    """Download ``url`` to ``dest`` (atomically) and check its md5; a mismatch leaves nothing."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as r:
            while block := r.read(1 << 20):
                out.write(block)
        got = _md5(Path(tmp))
        if got != md5:
            raise DatasetUnavailableError(f"{url}: md5 {got}, expected {md5}")
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


def download_mnist(raw: Path) -> None:
    """The four MNIST ``.gz`` files into ``raw``, trying each mirror in turn."""
    errors = []
    for name, md5 in MNIST_MD5.items():
        if (raw / name).is_file():
            continue
        for mirror in MNIST_MIRRORS:
            try:
                download_checked(mirror + name, md5, raw / name)
                break
            except (OSError, DatasetUnavailableError) as exc:
                errors.append(f"{mirror}{name}: {exc}")
        else:
            raise DatasetUnavailableError("; ".join(errors))


def download_cifar10(root: Path) -> None:
    """``cifar-10-python.tar.gz`` into ``root``, md5-checked, then unpacked (member paths checked)."""
    url, md5 = CIFAR10_URL
    archive = download_checked(url, md5, root / "cifar-10-python.tar.gz")
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(root, filter="data")
