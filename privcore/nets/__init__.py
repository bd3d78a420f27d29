"""Torch modules used by privcore (embedder, obfuscator, classifier, adversary, Lipschitz layers)."""
