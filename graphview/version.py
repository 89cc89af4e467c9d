"""The graphview version: written into graph files and shown as ``gv.__version__``."""
__version__ = "0.1.0"
