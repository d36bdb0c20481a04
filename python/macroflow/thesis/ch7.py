"""Seed 003 chapter 7 reproduced (see macroflow.thesis.core for the machinery)."""

from __future__ import annotations
