"""``python -m snapstore``: the command line."""

from snapstore.cli import main

if __name__ == "__main__":
    main()
