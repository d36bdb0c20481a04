"""Seed 003 (the dissertation) reproduced figure by figure: ``macroflow reproduce thesis``.

``core`` holds the machinery (figure sets, running them into a results store, the index and
chapter pages); each ``chN`` module registers the figure sets of one chapter. Importing this
package registers them all, in the dissertation's order.
"""

from macroflow.thesis import ch5, ch5_more, ch6, ch7, ch8, ch9  # noqa: F401  (registration)
from macroflow.thesis.core import SETS, names, reproduce_thesis, set_of

__all__ = ["SETS", "names", "reproduce_thesis", "set_of"]
