"""ONNX export and import (issue 20)."""
