"""Which floating-point ONNX initializers ``graphview.onnx.load`` makes CONSTANTs, not trainable VARIABLEs.

ONNX does not say which initializers are weights: exporters (PyTorch's dynamo exporter above all) write
every constant as an initializer, the ``sqrt(2)`` of a decomposed GELU, the ``3.0`` of ``x / 3.0``, clamp
bounds, a Pad's constant_value, an LSTM's zero initial state. The rule (``fixed_rule``):

* a rank-0 float initializer (a scalar) is a CONSTANT: a model's parameters are tensors, and a learned
  scalar (a temperature) is rare enough to be made trainable by hand after loading;
* a float initializer whose every use is an input that is a constant setting and not a parameter
  (``CONSTANT_INPUTS``: Clip's bounds, Pad's constant_value, LSTM's and GRU's initial states) is a CONSTANT;
* every other float initializer (rank >= 1, used as a tensor operand) stays a trainable VARIABLE, and batch
  norm's running statistics are VARIABLEs with ``trainable=False`` (state).
"""

# op type -> the input positions that hold constant settings, not parameters.
CONSTANT_INPUTS = {"Clip": {1, 2}, "Pad": {1, 2, 3}, "LSTM": {4, 5, 6}, "GRU": {4, 5}, "RNN": {4, 5}}


def fixed_rule(graph):
    """A test ``fixed(name, value)``: True if the float initializer ``name`` (its array ``value``) of the ONNX
    ``graph`` loads as a CONSTANT (the uses of every name are collected once)."""
    uses = {}
    for node in graph.node:
        for position, used in enumerate(node.input):
            uses.setdefault(used, []).append((node.op_type, position))
    outputs = {value_info.name for value_info in graph.output}

    def fixed(name, value):
        if value.ndim == 0:
            return True
        return name in uses and name not in outputs and all(
            position in CONSTANT_INPUTS.get(op_type, ()) for op_type, position in uses[name])
    return fixed
