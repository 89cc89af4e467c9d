"""The ``graphview`` command (filled in by the CLI issue)."""
import sys


def main(argv=None):
    """Entry point of the ``graphview`` command."""
    import graphview
    print(f"graphview {graphview.__version__}: registered ops: {', '.join(graphview.ops())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
