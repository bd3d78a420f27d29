"""The shipped models, loaded and verified: :mod:`privcore.models.pipeline` (the posthoc pipeline of a
dataset and obfuscator, and the inference-privacy classifiers) and :mod:`privcore.models.catalogue`
(which models a dataset ships, from their cards).
"""

from privcore._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "IPModel": "pipeline",
        "IPModels": "pipeline",
        "Pipeline": "pipeline",
        "load_ip_models": "pipeline",
        "load_pipeline": "pipeline",
        "default_models_dir": "catalogue",
        "list_models": "catalogue",
    },
)
