"""``python -m graphview.adr ...``: the ``graphview adr`` command on its own."""
import sys

from graphview.adr.cli import main

sys.exit(main())
