"""privcore: the library behind the privlens dashboard.

Inference-time privacy for ML models: posthoc privacy by extended Propose-Test-Release over
exact local Lipschitz constants (LipMIP), inference privacy (Lap-Output, Gauss-Output,
Gauss-Input) with accounting, and learned DP mechanisms with Lipschitz networks.
This package never imports Streamlit.
"""

__version__ = "0.1.0"

__all__ = ["Certification", "Release", "__version__", "certify", "release"]

_API = ("Certification", "Release", "certify", "release")


def __getattr__(name: str):  # PEP 562: `import privcore` stays light (the CLI's --help needs no torch)
    if name in _API:
        from privcore import api

        return getattr(api, name)
    raise AttributeError(f"module 'privcore' has no attribute {name!r}")
