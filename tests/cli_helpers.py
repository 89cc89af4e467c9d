"""What several CLI test files share."""
from graphview.cli import main


def usage_error(capsys, argv, message):
    """``graphview argv`` exits 2 with one line on stderr holding ``message`` (no traceback)."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1, f"one line on stderr, got {err!r}"
    assert "Traceback" not in err
    assert message in err, err
    return err
