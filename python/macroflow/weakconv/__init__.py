"""Seed 001 (Lautenschlaeger, "The Weak Convergence of TCP Bandwidth Sharing") reproduced."""
