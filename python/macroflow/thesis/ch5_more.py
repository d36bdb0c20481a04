"""Seed 003 chapter 5, Figs. 5.14-5.31 (see macroflow.thesis.core for the machinery)."""

from __future__ import annotations
