"""Seed 000 (Akella, Seshan, Balakrishnan, "The Impact of False Sharing on Shared Congestion
Management"): the analytic model of its section 3 (Eq. 1, Eq. 2) in :mod:`.model`. The scenarios
of its Fig. 1 (a)-(d) are ``scenarios/falseshare_fig1*.toml``.

Nothing is imported here: ``from macroflow.falseshare import model``.
"""
