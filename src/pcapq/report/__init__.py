"""Renderers: turn an analysis into text for people (terminal) or files (JSON)."""
