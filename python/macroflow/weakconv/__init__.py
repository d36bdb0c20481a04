"""Seed 001 (Lautenschlaeger, "The Weak Convergence of TCP Bandwidth Sharing") reproduced: the
Markov model (:mod:`.markov`), the long runs (:mod:`.runs`) and their analysis and page
(:mod:`.report`); ``macroflow reproduce weak-convergence``."""

from macroflow.weakconv.report import reproduce_weak_convergence

__all__ = ["reproduce_weak_convergence"]
