from macroflow._native import __version__
