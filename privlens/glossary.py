"""The symbols and names the pages use without defining them, one line each: shown as the Home page's
Glossary and as the ``help=`` tooltip where the Release page first uses each. Plain text, no Streamlit."""

from __future__ import annotations

__all__ = ["GLOSSARY", "help_for", "model_help"]

GLOSSARY: dict[str, str] = {
    "φ": "PTR's private score of your image: how far its embedding is from one where f's local Lipschitz "
         "constant exceeds Δp, φ = max(R*/2, R* − R). The noisy test on φ decides whether PTR releases "
         "(else ⊥).",
    "Δp": "PTR's proposed sensitivity: a bound on f's local Lipschitz constant (ℓ∞→ℓ1), μ + 3σ over the "
          "training embeddings; the release noise is Lap(Δp·R/(ε/2)) when the test passes.",
    "R*": "The largest radius around your embedding whose certified local Lipschitz constant stays ≤ Δp.",
    "R": "The neighbourhood radius (ℓ∞ on the embedding z): images whose embeddings lie within R of each "
         "other are the pairs the posthoc guarantee hides from each other.",
    "α": "The inference-privacy radius (ℓ2 or ℓ1 on the pixels): inputs within α of each other are hidden "
         "from each other.",
    "G": "The certified global Lipschitz constant of f (ℓ∞→ℓ1) over the model's public box: the Global "
         "mechanism's noise is Lap(G·R/ε). G₂ is the ℓ∞→ℓ2 one of the Gaussian variant.",
    "β-VAE": "The embedder g: a variational auto-encoder with a weight β on its KL term; z = g(x) is its "
             "encoder's mean, and its decoder draws the reconstruction.",
    "ARL-C-N": "An obfuscator f trained with the three regularisers its name lists: ARL (adversarial "
               "representation learning: an attacker learns to rebuild the image and f is trained against "
               "it), C (contrastive: same class close, other classes apart) and N (noise: the classifier "
               "trained on noisy releases). ARL-C, C-N, N … combine fewer; Encoder has none.",
    "N-global": "MNIST's default obfuscator: the N regulariser aimed at the Global mechanism's noise "
                "(trained at total ε of 10 and 20), on an embedder trained with labels; no ARL term.",
    "LipMIP": "The exact local Lipschitz certifier: a mixed-integer program over a ReLU network's "
              "activation patterns, solved to optimality (Gurobi or HiGHS).",
    "⊥": "The refusal: PTR's test failed, so nothing is released (and the guarantee still holds).",
}


def help_for(*terms: str) -> str:
    """The glossary lines of ``terms`` as one tooltip ("**φ**: …" per line); unknown terms are skipped."""
    return "\n\n".join(f"**{t}**: {GLOSSARY[t]}" for t in terms if t in GLOSSARY)


def model_help(model: str) -> str:
    """A model name explained: its own entry (ARL-C-N, N-global) or, for another name made of the same
    parts (ARL-C, C-N, ARL-C-N-paper …), the entry on those parts."""
    if model in GLOSSARY:
        return help_for(model)
    if "-global-" in model:  # a tagged twin of N-global (N-global-e2o2)
        return (f"**{model}**: the N regulariser aimed at the Global mechanism's noise, trained for another "
                "total ε or output size than MNIST's default N-global (the card's recipe says which); "
                "no ARL term unless the name starts with ARL.")
    parts = set(model.removesuffix("-paper").split("-"))
    if parts <= {"ARL", "C", "N"}:
        return help_for("ARL-C-N")
    return ""
