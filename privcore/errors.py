"""Exceptions shared by every part of privcore.

Privacy code is security code: every failure is an exception, and no caller may
release anything after catching one.
"""

from __future__ import annotations


class PrivcoreError(Exception):
    """Base class of every error privcore raises on purpose."""


class ParameterError(PrivcoreError, ValueError):
    """A parameter outside its allowed values; the message names it, its value and the range
    (raised by :mod:`privcore.validation`; still a ``ValueError``)."""


class ParameterTypeError(ParameterError, TypeError):
    """A parameter of the wrong type (still a ``TypeError``)."""


class CertificationError(PrivcoreError):
    """A Lipschitz certificate could not be decided exactly (solver time-out, numerical
    trouble). A privacy decision must never be taken on such a result: the query fails and
    nothing is released."""


class DatasetUnavailableError(PrivcoreError):
    """A dataset's files are not present; the message says how to get them."""


class CheckpointError(PrivcoreError):
    """A checkpoint is missing, corrupt, or does not match its card."""
