"""Gradient rules of the normalization ops (graphview/ops/norm.py): dedicated backward kernels.

batch_norm's gradient of each input is one ``batch_norm_grad`` node, which follows the run's purpose
as the forward op does: through the batch statistics in a training step (PyTorch's batch-norm
backward; the running statistics get 0), through the running statistics elsewhere (a per-channel
affine map). layer_norm's gradients are ``layer_norm_grad`` nodes. Both backward ops are marked
non-differentiable: these rules give first derivatives only.
"""
from graphview.ops.norm import LAYER_PARTS, batch_norm_grad, batch_norm_op, layer_norm_grad, layer_norm_op
from graphview.registry import defvjp


def _batch_norm_vjp(g, out, x, gamma, beta, running_mean, running_var, *masks, axis=1, eps=1e-5):
    """gamma's and beta's gradients are the rows of one "affine" node (one pass over x and g, not two);
    the masks (the dims with lengths, see ops/norm.py) get no gradient."""
    def part(name):
        return batch_norm_grad(x, gamma, running_mean, running_var, g, *masks, axis=axis, eps=eps, part=name)
    affine = part("affine")
    return ((part("x"), affine[0], affine[1], part("running_mean"), part("running_var"))
            + (None,) * len(masks))


def _layer_norm_vjp(g, out, x, gamma, beta, axis=-1, eps=1e-5):
    return tuple(layer_norm_grad(x, gamma, g, axis=axis, eps=eps, part=part) for part in LAYER_PARTS)


defvjp(batch_norm_op, _batch_norm_vjp)
defvjp(layer_norm_op, _layer_norm_vjp)
