"""Mechanism lab: learned ε-DP mechanisms with Lipschitz networks (Shavit & Gjura 2019)."""
