"""setuptools' build backend, quiet about the one deliberate choice in graphview's layout.

The repository keeps the kernels in a top-level ``kernels/`` folder and installs them
as ``graphview_kernels`` (ADR 0015). setuptools serves such a mapped folder in an
editable install through a meta path finder and then prints an information-only
notice about folders in the working directory shadowing the package. The mapping is
the point of the layout, so that notice is silenced here, and only that notice:
every other warning of setuptools still reaches the user.
"""
import warnings

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403  (the PEP 517/660 hooks, unchanged)
from setuptools.warnings import InformationOnly


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Editable installation", category=InformationOnly)
        return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
