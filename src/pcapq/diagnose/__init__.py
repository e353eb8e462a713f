"""Reasoning across connections: where the capture was taken, and what went wrong (findings)."""

from pcapq.diagnose.findings import Diagnosis, diagnose
from pcapq.finding import Finding
from pcapq.finding.capture_point import CapturePoint, infer

__all__ = ["CapturePoint", "Diagnosis", "Finding", "diagnose", "infer"]
