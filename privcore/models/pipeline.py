"""One entry point to the trained networks: :func:`load_pipeline` (posthoc-PTR: embedder g,
decoder, obfuscator f, classifier, attacker, R and Δp), :func:`load_ip_models` (inference-privacy
classifiers with their certified global Lipschitz constants) and :func:`list_models`.

Everything comes back verified (weights' SHA-256, architecture, which embedder an obfuscator was
trained on, which obfuscator an attacker attacks), in eval mode and without gradients: inference
only. Checkpoints live in ``<models_dir>/<dataset>/<name>.{safetensors,json}``; ``models_dir``
defaults to ``$PRIVCORE_MODELS_DIR`` or the repository's ``models/``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from privcore.errors import CheckpointError
from privcore.lipschitz.rounding import CertifiedNet
from privcore.models.catalogue import ModelInfo, default_models_dir, list_models
from privcore.nets.checkpoint import card_path, load_checkpoint
from privcore.nets.embedder import LatentDecoder, MeanEncoder
from privcore.validation import check_finite_array

__all__ = [
    "DeltaP",
    "IPModel",
    "IPModels",
    "ModelInfo",
    "Pipeline",
    "default_models_dir",
    "list_models",
    "load_ip_models",
    "load_pipeline",
]


def _device(device: str | torch.device | None) -> torch.device:
    from privcore.nets.device import resolve_device

    return resolve_device(device)


@dataclass(frozen=True)
class DeltaP:
    """Δp statistics stored with an obfuscator (posthoc-PTR Sec. 6): μ, σ of L(f, N(z_i, R)) over
    ``n`` training embeddings and the proposal ``proposed`` = μ + ``n_sigma``·σ."""

    mu: float
    sigma: float
    n_sigma: float
    proposed: float
    n: int
    radius: float
    all_exact: bool

    @classmethod
    def from_card(cls, d: Mapping[str, Any] | None) -> DeltaP | None:
        """Read the card's ``delta_p`` block (None when Δp has not been computed)."""
        if not d:
            return None
        return cls(
            mu=float(d["mu"]),
            sigma=float(d["sigma"]),
            n_sigma=float(d["n_sigma"]),
            proposed=float(d["proposed"]),
            n=int(d["n"]),
            radius=float(d["radius"]),
            all_exact=bool(d.get("all_exact", False)),
        )


@dataclass(frozen=True, eq=False)
class Pipeline:
    """The posthoc-PTR networks of one dataset and obfuscator variant (Fig. 1 of the paper).

    ``embedder`` maps images (N, C, H, W) in [0, 1] to latent means z; ``decoder`` maps z back to
    images; ``obfuscator`` (a Linear/ReLU ``nn.Sequential``) maps z to z̃; ``classifier`` maps z̃
    to class logits; ``attacker`` maps a release (z̃ plus noise) to an image, or is None when no
    attacker was trained. ``radius`` is the paper's R in ℓ∞ on z; ``delta_p`` the stored Δp
    statistics (None before ``python -m privcore train delta-p``). ``classifier`` is the
    noise-aware release classifier ``classifier-<variant>`` when one was fitted
    (``python -m privcore train classifier``), else the obfuscator's own head;
    ``classifier_source`` says which. ``domain_embedder``/``domain_decoder`` are the dataset's reference
    VAE (``<dataset>/embedder``) when the obfuscator was trained on another embedder (None otherwise):
    the domain check (:func:`privcore.inputs.domain.check`) uses it, so that it warns the same whichever model
    of the dataset releases.
    """

    dataset: str
    obfuscator_name: str
    embedder: nn.Module
    decoder: nn.Module
    obfuscator: nn.Sequential
    classifier: nn.Module
    attacker: nn.Module | None
    radius: float
    delta_p: DeltaP | None
    image_shape: tuple[int, int, int]
    class_names: tuple[str, ...]
    latent_dim: int
    cards: Mapping[str, Mapping[str, Any]]
    device: torch.device
    classifier_source: str = "obfuscator"
    domain_embedder: nn.Module | None = None
    domain_decoder: nn.Module | None = None
    domain_card: Mapping[str, Any] | None = None

    @property
    def domain_digest(self) -> str:
        """SHA-256 of the weights of the VAE the domain check uses."""
        card = self.domain_card if self.domain_card is not None else self.cards["embedder"]
        return str(card["weights"]["sha256"])

    @torch.no_grad()
    def domain_embed(self, x: torch.Tensor) -> torch.Tensor:
        """The domain check's latent means of images ``x`` (N, C, H, W): the reference VAE's, else g's."""
        if self.domain_embedder is None:
            return self.embed(x)
        return self.domain_embedder(x.to(self.device, torch.float32))

    @torch.no_grad()
    def domain_decode(self, z: torch.Tensor) -> torch.Tensor:
        """The domain check's reconstructions of latent points (the reference VAE's, else g's)."""
        if self.domain_decoder is None:
            return self.decode(z)
        return self.domain_decoder(z.to(self.device, torch.float32))

    @property
    def proposed_delta_p(self) -> float | None:
        """Δp = μ + n·σ from the card, or None."""
        return None if self.delta_p is None else self.delta_p.proposed

    @torch.no_grad()
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """z = g(x) for a batch of images (or one image of shape (C, H, W))."""
        single = x.ndim == 3
        z = self.embedder((x.unsqueeze(0) if single else x).to(self.device, torch.float32))
        return z[0] if single else z

    @torch.no_grad()
    def obfuscate(self, z: torch.Tensor) -> torch.Tensor:
        """z̃ = f(z)."""
        return self.obfuscator(z.to(self.device, torch.float32))

    @torch.no_grad()
    def classify(self, z_tilde: torch.Tensor, noise_scale: float = 0.0) -> torch.Tensor:
        """Class logits of obfuscated vectors released with Laplace scale ``noise_scale`` per
        coordinate (Δp·R/ε; 0 for noise-free f(z)). Only a noise-aware classifier uses the scale."""
        from privcore.nets.models import classify

        return classify(self.classifier, z_tilde.to(self.device, torch.float32), noise_scale)

    @torch.no_grad()
    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Images decoded from latent points."""
        return self.decoder(z.to(self.device, torch.float32))

    @torch.no_grad()
    def reconstruct(self, release: torch.Tensor) -> torch.Tensor:
        """The attacker's reconstruction from a release (CheckpointError when no attacker)."""
        if self.attacker is None:
            raise CheckpointError(f"no attacker was trained for {self.dataset}/{self.obfuscator_name}")
        return self.attacker(release.to(self.device, torch.float32))

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Noise-free (ε = ∞) predicted classes of images."""
        return self.classify(self.obfuscate(self.embed(x))).argmax(-1)


def _stem(models_dir: Path, dataset: str, name: str) -> Path:
    return models_dir / dataset / name


def _missing(
    models_dir: Path, dataset: str, what: str, pattern: str, *, obfuscator: str = ""
) -> CheckpointError:
    """The error for a missing model: it lists the datasets whose directory holds a card matching
    ``pattern`` (``embedder.json``, ``obfuscator-*.json``, ``ip-*.json``) — datasets a user can pick —
    never other folders there (the lab's models, caches), and the names ``dataset`` has, if any, and the
    command that trains it (``train global-model`` for a ``*-global`` ``obfuscator``, else ``train all``)."""
    have = (
        sorted(p.name for p in models_dir.iterdir() if p.is_dir() and any(p.glob(pattern)))
        if models_dir.is_dir()
        else []
    )
    prefix = pattern.split("*", 1)[0] if "*" in pattern else ""
    names = sorted(p.name[len(prefix) : -len(".json")] for p in (models_dir / dataset).glob(pattern))
    here = f"; {dataset} has: {', '.join(names)}" if names else ""
    return CheckpointError(
        f"no {what} for dataset {dataset!r} in {models_dir} "
        f"(datasets with such models: {', '.join(have) or 'none'}{here}); "
        f"train it with `{_train_command(dataset, obfuscator)}`"
    )


def _train_command(dataset: str, obfuscator: str) -> str:
    if obfuscator.endswith("-global"):
        name = "" if obfuscator == "N-global" else f" --name {obfuscator}"
        return f"python -m privcore train global-model --dataset {dataset}{name}"
    return f"python -m privcore train all --dataset {dataset}"


def load_pipeline(
    dataset: str,
    obfuscator: str = "ARL-C-N",
    models_dir: str | os.PathLike[str] | None = None,
    device: str | torch.device | None = None,
) -> Pipeline:
    """Load and verify the posthoc-PTR networks of ``dataset`` with obfuscator variant ``obfuscator``
    (a Table-1 name such as ``"ARL-C-N"`` or an α-sweep name such as ``"ARL-alpha0.9"``)."""
    mdir = Path(models_dir) if models_dir is not None else default_models_dir()
    dev = _device(device)
    obf_stem = _stem(mdir, dataset, f"obfuscator-{obfuscator}")
    if not card_path(obf_stem).is_file():
        what = f"obfuscator {obfuscator!r}"
        raise _missing(mdir, dataset, what, "obfuscator-*.json", obfuscator=obfuscator)
    obf = load_checkpoint(obf_stem, kind="obfuscator", dataset=dataset, device=dev)
    # the embedder the obfuscator's card names (a plain file name, checked by the card schema)
    emb_stem = obf_stem.with_name(obf.card["embedder"]["file"]).with_suffix("")
    if not card_path(emb_stem).is_file():
        raise _missing(mdir, dataset, "embedder", f"{emb_stem.name}.json", obfuscator=obfuscator)
    emb = load_checkpoint(emb_stem, kind="embedder", dataset=dataset, device=dev)
    if obf.card["embedder"]["sha256"] != emb.card["weights"]["sha256"]:
        raise CheckpointError(
            f"{obf_stem}.json was trained on another embedder "
            f"(sha256 {obf.card['embedder']['sha256'][:12]}…) "
            f"than {emb_stem}.safetensors ({emb.card['weights']['sha256'][:12]}…); retrain the obfuscator"
        )
    att_stem = _stem(mdir, dataset, f"attacker-{obfuscator}")
    attacker = None
    cards: dict[str, Mapping[str, Any]] = {"embedder": emb.card, "obfuscator": obf.card}
    if card_path(att_stem).is_file():
        att = load_checkpoint(att_stem, kind="attacker", dataset=dataset, device=dev)
        if att.card["obfuscator"]["sha256"] != obf.card["weights"]["sha256"]:
            raise CheckpointError(
                f"{att_stem}.json attacks another obfuscator than {obf_stem}.safetensors; "
                f"retrain the attacker"
            )
        attacker = att["attacker"]
        cards["attacker"] = att.card
    classifier, source = obf["classifier"], "obfuscator"
    clf_stem = _stem(mdir, dataset, f"classifier-{obfuscator}")
    if card_path(clf_stem).is_file():
        clf = load_checkpoint(clf_stem, kind="release-classifier", dataset=dataset, device=dev)
        if clf.card["obfuscator"]["sha256"] != obf.card["weights"]["sha256"]:
            raise CheckpointError(
                f"{clf_stem}.json was fitted on another obfuscator than {obf_stem}.safetensors; "
                "refit it with `python -m privcore train classifier "
                f"--dataset {dataset} --variant {obfuscator}`"
            )
        classifier, source = clf["classifier"], "release-classifier"
        cards["classifier"] = clf.card
    reference: dict[str, Any] = {}
    ref_stem = _stem(mdir, dataset, "embedder")
    if emb_stem != ref_stem and card_path(ref_stem).is_file():  # the domain check's VAE (class docstring)
        ref = load_checkpoint(ref_stem, kind="embedder", dataset=dataset, device=dev)
        reference = {"domain_embedder": MeanEncoder(ref["vae"]).eval(),
                     "domain_decoder": LatentDecoder(ref["vae"]).eval(), "domain_card": ref.card}
    vae = emb["vae"]
    f = obf["obfuscator"]
    if not isinstance(f, nn.Sequential):
        raise CheckpointError(f"{obf_stem}: the obfuscator must be a Linear/ReLU nn.Sequential")
    return Pipeline(
        dataset=dataset,
        obfuscator_name=obfuscator,
        embedder=MeanEncoder(vae).eval(),
        decoder=LatentDecoder(vae).eval(),
        obfuscator=f,
        classifier=classifier,
        attacker=attacker,
        radius=float(obf.card["radius"]["value"]),
        delta_p=DeltaP.from_card(obf.card.get("delta_p")),
        image_shape=tuple(int(v) for v in emb.card["dataset"]["image_shape"]),  # type: ignore[arg-type]
        class_names=tuple(emb.card["dataset"]["class_names"]),
        latent_dim=int(emb.card["architecture"]["vae"]["kwargs"]["latent_dim"]),
        cards=cards,
        device=dev,
        classifier_source=source,
        **reference,
    )


#: images per forward pass of an inference-privacy CNN on the CPU (:meth:`IPModel.__call__`): on one
#: thread, 2 000 MNIST images ran about 1.9× slower in one pass than in chunks of 64–256 (the same
#: scores), and about 1.8× faster again with the weights and each chunk channels last (the same
#: classes; scores within float rounding)
FORWARD_CHUNK = 128


@dataclass(frozen=True, eq=False)
class IPModel:
    """An inference-privacy classifier on pixels in [0, 1]. ``lipschitz`` holds certified global
    ℓ1→ℓ1 and ℓ2→ℓ2 constants (recomputed from the loaded weights) for the Lipschitz models, and
    is None for the CNNs (Gauss-Input only). ``finetune`` describes Gauss-Input fine-tuning.

    Lipschitz models are evaluated in float64 (:class:`privcore.lipschitz.rounding.CertifiedNet`,
    ``certified``) and ``rounding`` holds certified η₁, η₂ with ‖Ĉ(x) − C(x)‖_p ≤ η_p for every x
    in [0, 1]^d, Ĉ what :meth:`scores` computes and C the real-number model that μ certifies: pass
    ``rounding=η`` to Gauss-/Lap-Output (without it, float32 outputs differed by up to 4.3·μ₁·α;
    :mod:`privcore.lipschitz.rounding`)."""

    name: str
    model: nn.Module
    lipschitz: Mapping[str, float] | None
    finetune: Mapping[str, Any] | None
    card: Mapping[str, Any]
    rounding: Mapping[str, float] | None = None
    certified: CertifiedNet | None = None

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Scores of a batch of images (N, C, H, W): float64 on the CPU for the Lipschitz models
        (any input, e.g. Gauss-Input's noisy pixels), the model's own float32 forward otherwise."""
        if self.certified is not None:
            flat = torch.as_tensor(x).detach().to("cpu", torch.float64).reshape(x.shape[0], -1)
            return torch.from_numpy(self.certified(flat.numpy()))
        dev = next(self.model.parameters()).device
        x = x.to(dev, torch.float32)
        if dev.type != "cpu" or x.ndim != 4 or len(x) <= FORWARD_CHUNK:
            return self.model(x)
        # in chunks whose activations stay in the CPU's caches, channels last
        return torch.cat([self.model(chunk.contiguous(memory_format=torch.channels_last))
                          for chunk in x.split(FORWARD_CHUNK)])

    @torch.no_grad()
    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """The outputs Gauss-/Lap-Output release, within ``rounding`` of the exact model: float64,
        for a batch of images with pixels in [0, 1] (anything else is refused: η holds only there)."""
        if self.certified is None:
            raise CheckpointError(f"{self.name} has no certified Lipschitz constant: use Gauss-Input")
        flat = check_finite_array("x", x).reshape(len(x), -1)
        if flat.size and (flat.min() < 0.0 or flat.max() > 1.0):
            raise ValueError(
                f"x must hold pixel values in [0, 1] (the rounding bound η covers only those), got range "
                f"[{flat.min():.4g}, {flat.max():.4g}]"
            )
        return torch.from_numpy(self.certified(flat))


@dataclass(frozen=True, eq=False)
class IPModels:
    """The IP classifiers of one dataset, by name (``ip-cnn``, ``ip-cnn-gauss-input``,
    ``ip-lipschitz-l1``, ``ip-lipschitz-l2``: whichever were trained)."""

    dataset: str
    models: Mapping[str, IPModel]
    image_shape: tuple[int, int, int]
    class_names: tuple[str, ...]

    def __getitem__(self, name: str) -> IPModel:
        if name not in self.models:
            raise KeyError(f"no IP model {name!r} for {self.dataset}; have {', '.join(self.models)}")
        return self.models[name]


def load_ip_models(
    dataset: str,
    models_dir: str | os.PathLike[str] | None = None,
    device: str | torch.device | None = None,
) -> IPModels:
    """Load every IP classifier of ``dataset``. For Lipschitz models the certified constants are
    recomputed from the loaded weights; a card that states a smaller constant than the weights
    have is refused (CheckpointError), so a mechanism never calibrates on an understated μ. Their
    float64 rounding bounds η₁, η₂ over pixels in [0, 1] are computed here (``IPModel.rounding``)."""
    mdir = Path(models_dir) if models_dir is not None else default_models_dir()
    dev = _device(device)
    stems = sorted((mdir / dataset).glob("ip-*.json"))
    if not stems:
        raise _missing(mdir, dataset, "IP classifiers", "ip-*.json")
    models: dict[str, IPModel] = {}
    shape: tuple[int, int, int] | None = None
    classes: tuple[str, ...] = ()
    for s in stems:
        ck = load_checkpoint(s, kind="ip-classifier", dataset=dataset, device=dev)
        model = ck["model"]
        lip = rounding = certified = None
        if "lipschitz" in ck.card:
            if not hasattr(model, "lipschitz_bound"):
                raise CheckpointError(
                    f"{s}: card states Lipschitz constants but the model cannot certify them"
                )
            live = {"l1": float(model.lipschitz_bound(1)), "l2": float(model.lipschitz_bound(2))}
            for p, v in live.items():
                stated = float(ck.card["lipschitz"][p])
                if not math.isfinite(v) or v > stated * (1 + 1e-9):
                    raise CheckpointError(
                        f"{s}: the weights' certified ℓ{p[1]} constant {v:.6g} exceeds the "
                        f"card's {stated:.6g}; regenerate the checkpoint"
                    )
            lip = live
            certified = CertifiedNet.from_module(model)  # TypeError for a layer it cannot analyse
            rounding = {p: certified.error_bound(p=p, input_bound=1.0) for p in ("l1", "l2")}
        elif dev.type == "cpu":
            model = model.to(memory_format=torch.channels_last)  # the CNN's fast layout (IPModel.__call__)
        models[str(ck.card["name"])] = IPModel(
            name=str(ck.card["name"]),
            model=model,
            lipschitz=lip,
            finetune=ck.card.get("finetune"),
            card=ck.card,
            rounding=rounding,
            certified=certified,
        )
        shape = tuple(int(v) for v in ck.card["dataset"]["image_shape"])  # type: ignore[assignment]
        classes = tuple(ck.card["dataset"]["class_names"])
    assert shape is not None
    return IPModels(dataset=dataset, models=models, image_shape=shape, class_names=classes)
