"""Seed 003 chapter 9 reproduced (see macroflow.thesis.core for the machinery)."""

from __future__ import annotations
