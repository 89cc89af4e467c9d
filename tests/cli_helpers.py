"""What several CLI test files share."""
import contextlib
import io

from graphview.cli import main


def run_main(*argv):
    """``graphview argv`` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


def usage_error(capsys, argv, message):
    """``graphview argv`` exits 2 with one line on stderr holding ``message`` (no traceback)."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1, f"one line on stderr, got {err!r}"
    assert "Traceback" not in err
    assert message in err, err
    return err
