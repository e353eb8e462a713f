"""Reasoning across connections: where the capture was taken, and what went wrong (findings)."""

from pcapq.diagnose.capture_point import CapturePoint, infer
from pcapq.diagnose.finding import Finding
from pcapq.diagnose.findings import Diagnosis, diagnose

__all__ = ["CapturePoint", "Diagnosis", "Finding", "diagnose", "infer"]
