"""Process-wide switches: ``gv.config.fusion`` and where generated kernels are cached (ADR 0024).

``fusion`` starts from the environment variable ``GRAPHVIEW_FUSION`` ("0", "false", "off" or "no" turn
it off) and can be set at any time: plans are cached per setting, so the next run follows it.
``cache_dir`` is ``GRAPHVIEW_CACHE_DIR`` when set, else a ``graphview`` folder in the user's cache
directory; ``max_cached_kernels`` caps the generated kernels kept there (oldest removed first).
"""
import os
import sys
import warnings

from graphview.errors import GraphviewError

OFF = ("0", "false", "off", "no")
ON = ("", "1", "true", "on", "yes")


def user_cache_dir():
    """The platform's per-user cache folder joined with ``graphview``."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
    elif sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "graphview")


class Config:
    """The switches; ``gv.config`` is the one instance."""

    def __init__(self):
        setting = os.environ.get("GRAPHVIEW_FUSION", "1").strip().lower()
        if setting not in OFF + ON:
            warnings.warn(f"GRAPHVIEW_FUSION={setting!r} is not one of {', '.join(OFF + ON[1:])}; fusion stays on",
                          RuntimeWarning, stacklevel=2)
        self.fusion = setting not in OFF
        self.cache_dir = os.environ.get("GRAPHVIEW_CACHE_DIR") or user_cache_dir()
        self.max_cached_kernels = 512

    def __setattr__(self, name, value):
        if name == "fusion" and not isinstance(value, bool):
            raise GraphviewError(f"gv.config.fusion must be True or False, not {value!r}")
        if name == "max_cached_kernels" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise GraphviewError(f"gv.config.max_cached_kernels must be an int >= 1, not {value!r}")
        if name == "cache_dir" and not isinstance(value, (str, os.PathLike)):
            raise GraphviewError(f"gv.config.cache_dir must be a path, not {value!r}")
        if name not in ("fusion", "cache_dir", "max_cached_kernels"):
            raise GraphviewError(f"gv.config has no setting {name!r}; it has fusion, cache_dir, max_cached_kernels")
        object.__setattr__(self, name, value)

    def __repr__(self):
        return (f"gv.config(fusion={self.fusion}, cache_dir={self.cache_dir!r}, "
                f"max_cached_kernels={self.max_cached_kernels})")


config = Config()
