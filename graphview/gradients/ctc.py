"""The gradient rule of the CTC loss (graphview/ops/ctc.py): its dedicated backward kernel ctc_grad.

ctc_grad is not differentiable, so there are no second derivatives through ctc; labels and lengths
are integers and get no gradient.
"""
from graphview.ops.ctc import ctc_grad
from graphview.registry import defvjp


def _ctc(g, out, log_probs, labels, input_lengths, label_lengths, blank=0, reduction="mean", zero_infinity=False):
    return (ctc_grad(log_probs, labels, input_lengths, label_lengths, g, blank=blank, reduction=reduction,
                     zero_infinity=zero_infinity), None, None, None)


defvjp("ctc", _ctc)
