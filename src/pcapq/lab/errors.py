"""Errors of `pcapq lab`."""

from __future__ import annotations


class LabError(Exception):
    """A lab scenario could not be set up or run (a command inside a namespace failed)."""


class LabUnavailable(LabError):
    """This machine cannot run the lab: not root, a tool missing, or no network namespaces."""


class LabNeedsRoot(LabUnavailable):
    """Creating network namespaces needs root."""
