"""Seed 003 chapter 8 reproduced (see macroflow.thesis.core for the machinery)."""

from __future__ import annotations
