"""Learning-rate schedules: a function of the iteration (or epoch) count giving the learning rate.

Pass one as ``learning_rate=`` to any updater. ``unit="iteration"`` (the
default) counts optimisation steps from 0; ``unit="epoch"`` counts epochs.
"""
import math

from graphview.errors import GraphviewError


class Schedule:
    """Base class: ``rate(count)`` is the learning rate after ``count`` iterations or epochs."""

    def __init__(self, initial, unit="iteration"):
        if unit not in ("iteration", "epoch"):
            raise GraphviewError(f"{type(self).__name__}: unit must be 'iteration' or 'epoch', not {unit!r}")
        if not initial > 0:
            raise GraphviewError(f"{type(self).__name__}: the initial learning rate must be positive, not {initial!r}")
        self.initial = float(initial)
        self.unit = unit

    def __call__(self, iteration, epoch):
        return self.rate(iteration if self.unit == "iteration" else epoch)

    def rate(self, count):
        raise NotImplementedError

    def __repr__(self):
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class Constant(Schedule):
    """The same learning rate throughout."""

    def rate(self, count):
        return self.initial


class StepDecay(Schedule):
    """``initial * gamma ** (count // step_size)``: multiply by gamma every step_size iterations/epochs."""

    def __init__(self, initial, step_size, gamma=0.1, unit="iteration"):
        super().__init__(initial, unit)
        if step_size < 1:
            raise GraphviewError(f"StepDecay: step_size must be at least 1, not {step_size}")
        self.step_size, self.gamma = int(step_size), float(gamma)

    def rate(self, count):
        return self.initial * self.gamma ** (count // self.step_size)


class ExponentialDecay(Schedule):
    """``initial * rate ** (count / decay_steps)``: a smooth decay by ``rate`` every decay_steps."""

    def __init__(self, initial, decay_rate, decay_steps=1, unit="iteration"):
        super().__init__(initial, unit)
        if decay_steps <= 0:
            raise GraphviewError(f"ExponentialDecay: decay_steps must be positive, not {decay_steps}")
        self.decay_rate, self.decay_steps = float(decay_rate), float(decay_steps)

    def rate(self, count):
        return self.initial * self.decay_rate ** (count / self.decay_steps)


class CosineDecay(Schedule):
    """Half a cosine from ``initial`` down to ``minimum`` over ``total`` iterations/epochs, then ``minimum``."""

    def __init__(self, initial, total, minimum=0.0, unit="iteration"):
        super().__init__(initial, unit)
        if total < 1:
            raise GraphviewError(f"CosineDecay: total must be at least 1, not {total}")
        self.total, self.minimum = int(total), float(minimum)

    def rate(self, count):
        progress = min(count, self.total) / self.total
        return self.minimum + 0.5 * (self.initial - self.minimum) * (1.0 + math.cos(math.pi * progress))


def as_schedule(learning_rate):
    """A Schedule from a number (constant) or a Schedule."""
    if isinstance(learning_rate, Schedule):
        return learning_rate
    if isinstance(learning_rate, (int, float)) and not isinstance(learning_rate, bool):
        return Constant(learning_rate)
    raise GraphviewError(f"learning_rate must be a positive number or a schedule "
                         f"(StepDecay, ExponentialDecay, CosineDecay), not {learning_rate!r}")
