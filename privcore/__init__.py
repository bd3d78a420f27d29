"""privcore: the library behind the privlens dashboard.

Inference-time privacy for ML models: posthoc privacy by extended Propose-Test-Release over
exact local Lipschitz constants (LipMIP), inference privacy (Lap-Output, Gauss-Output,
Gauss-Input) with accounting, and learned DP mechanisms with Lipschitz networks.
This package never imports Streamlit.
"""

__version__ = "0.1.0"
