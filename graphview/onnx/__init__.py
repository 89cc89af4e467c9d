"""ONNX: ``gv.onnx.export(g, path, outputs)`` writes a graph for any ONNX runtime, ``gv.onnx.load(path)``
reads an ONNX model as a graph that can be gradient-checked and trained (ADR 0028). Both need the
``onnx`` extra (``pip install graphview[onnx]``); importing this package does not."""
from graphview.onnx.export import OnnxExportError, UnsupportedOpsError, export, to_model
from graphview.onnx.load import load
from graphview.onnx.load_ops import OnnxImportError

__all__ = ["export", "to_model", "load", "OnnxExportError", "UnsupportedOpsError", "OnnxImportError"]
