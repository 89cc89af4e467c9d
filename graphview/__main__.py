"""``python -m graphview``: the same as the ``graphview`` command."""
import sys

from graphview.cli import main

if __name__ == "__main__":
    sys.exit(main())
