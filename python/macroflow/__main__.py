"""`python -m macroflow`: the main job. For now, the coupling demonstration in macroflow.demo."""

from macroflow.demo import main

if __name__ == "__main__":
    main()
