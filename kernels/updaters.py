"""Updater kernels: one optimisation step, written in place into the parameter buffer.

Every kernel takes flat (1-D, C-contiguous) arrays of one parameter: the
parameter itself, its gradient and the updater's state for it, plus scalar
hyper-parameters. It writes the new parameter values and state into the arrays
it is given and allocates nothing, so a parameter keeps its buffer for the
whole of training. ``WRITES`` declares, per kernel, the argument positions it
writes; every other argument is read only.

The formulas follow PyTorch's (torch.optim) so results can be compared step
for step. Arithmetic is done in float64 and rounded once when stored.
"""
import math

from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")

# Argument positions each kernel writes in place (the rest are read only).
WRITES = {
    "sgd": (0, 2),          # param, velocity
    "adam": (0, 2, 3),      # param, first moment, second moment
    "rmsprop": (0, 2, 3),   # param, mean square, momentum buffer
}


@njit(**JIT)
def sgd(param, grad, velocity, learning_rate, momentum, nesterov, weight_decay):
    """SGD: g = grad + weight_decay*param; with momentum v = momentum*v + g (Nesterov: g + momentum*v); param -= lr*step."""
    for i in range(param.size):
        g = grad[i] + weight_decay * param[i]
        if momentum != 0.0:
            v = momentum * velocity[i] + g
            velocity[i] = v
            if nesterov:
                g = g + momentum * v
            else:
                g = v
        param[i] = param[i] - learning_rate * g


@njit(**JIT)
def adam(param, grad, first, second, learning_rate, beta1, beta2, epsilon, step, weight_decay, decoupled):
    """Adam (L2 weight decay added to the gradient) or AdamW (``decoupled``: param *= 1 - lr*weight_decay)."""
    bias1 = 1.0 - beta1 ** step
    bias2 = 1.0 - beta2 ** step
    step_size = learning_rate / bias1
    root_bias2 = math.sqrt(bias2)
    shrink = 1.0 - learning_rate * weight_decay
    for i in range(param.size):
        p = param[i] * 1.0
        if decoupled:
            p = p * shrink
            g = grad[i] * 1.0
        else:
            g = grad[i] + weight_decay * p
        m = beta1 * first[i] + (1.0 - beta1) * g
        v = beta2 * second[i] + (1.0 - beta2) * g * g
        first[i] = m
        second[i] = v
        param[i] = p - step_size * m / (math.sqrt(v) / root_bias2 + epsilon)


@njit(**JIT)
def rmsprop(param, grad, mean_square, buffer, learning_rate, alpha, epsilon, momentum, weight_decay):
    """RMSProp: s = alpha*s + (1-alpha)*g^2; param -= lr*g/(sqrt(s)+eps), through a momentum buffer when momentum > 0."""
    for i in range(param.size):
        g = grad[i] + weight_decay * param[i]
        s = alpha * mean_square[i] + (1.0 - alpha) * g * g
        mean_square[i] = s
        scaled = g / (math.sqrt(s) + epsilon)
        if momentum != 0.0:
            b = momentum * buffer[i] + scaled
            buffer[i] = b
            scaled = b
        param[i] = param[i] - learning_rate * scaled
