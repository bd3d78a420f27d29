"""The shipped models, loaded and verified: :mod:`privcore.models.pipeline` (the posthoc pipeline of a
dataset and obfuscator, and the inference-privacy classifiers) and :mod:`privcore.models.catalogue`
(which models a dataset ships, from their cards).
"""
