"""History: what fit recorded (loss per iteration and per epoch, validation metrics), and its plot."""
import math


class History:
    """Losses and validation metrics of one ``fit`` call.

    ``iteration_losses[i]`` is the loss of step ``i``, ``epoch_losses[e]`` the
    mean loss over epoch ``e``'s examples, ``validation[e]`` a dict of metrics
    (``loss``, and ``accuracy`` when the config names a prediction) computed
    after epoch ``e``. ``epochs`` holds the epoch numbers (they continue from a
    checkpoint when training resumes).
    """

    def __init__(self):
        self.iteration_losses = []
        self.epoch_losses = []
        self.epochs = []
        self.validation = []
        self.stopped_early = False

    def metric(self, name):
        """One validation metric per epoch (NaN where it was not computed)."""
        return [entry.get(name, math.nan) for entry in self.validation]

    def to_dict(self):
        return {"iteration_losses": list(self.iteration_losses), "epoch_losses": list(self.epoch_losses),
                "epochs": list(self.epochs), "validation": [dict(v) for v in self.validation],
                "stopped_early": self.stopped_early}

    def plot(self, path):
        """Write a PNG of the training loss (per iteration and per epoch) and the validation curves."""
        try:
            import matplotlib  # an optional dependency (graphview[plot]), imported only to plot
            matplotlib.use("Agg")
            from matplotlib import pyplot  # optional, as above
        except ImportError:
            raise ImportError("History.plot needs matplotlib: pip install 'graphview[plot]' "
                              "(or pip install matplotlib)") from None
        names = sorted({key for entry in self.validation for key in entry if key != "loss"})
        figure, axes = pyplot.subplots(1, 1 + bool(names), figsize=(6 + 5 * bool(names), 4), squeeze=False)
        loss_axes = axes[0][0]
        if self.iteration_losses:
            per_epoch = len(self.iteration_losses) / max(1, len(self.epoch_losses))
            steps = [(i + 1) / per_epoch for i in range(len(self.iteration_losses))]
            loss_axes.plot(steps, self.iteration_losses, alpha=0.35, label="loss per iteration")
        epochs = list(range(1, len(self.epoch_losses) + 1))
        loss_axes.plot(epochs, self.epoch_losses, marker="o", label="loss per epoch")
        if self.validation:
            loss_axes.plot(epochs[:len(self.validation)], self.metric("loss"), marker="s", label="validation loss")
        loss_axes.set_xlabel("epoch")
        loss_axes.set_ylabel("loss")
        loss_axes.legend()
        if names:
            metric_axes = axes[0][1]
            for name in names:
                metric_axes.plot(epochs[:len(self.validation)], self.metric(name), marker="o", label=f"validation {name}")
            metric_axes.set_xlabel("epoch")
            metric_axes.legend()
        figure.tight_layout()
        figure.savefig(path, format="png")
        pyplot.close(figure)
        return path

    def __str__(self):
        names = self._names()
        # Each column as wide as its header or its widest value, headers right-aligned over the numbers.
        losses = [f"{loss:.5f}" for loss in self.epoch_losses]
        loss_width = max([len("loss")] + [len(text) for text in losses])
        metrics = {name: [f"{entry.get(name, math.nan):.4f}" for entry in self.validation] for name in names}
        widths = {name: max([len(f"val_{name}")] + [len(text) for text in metrics[name]]) for name in names}
        lines = [f"epoch  {'loss':>{loss_width}}" + "".join(f"  {'val_' + name:>{widths[name]}}" for name in names)]
        for index, loss in enumerate(losses):
            row = f"{self.epochs[index] + 1 if index < len(self.epochs) else index + 1:>5}  {loss:>{loss_width}}"
            if index < len(self.validation):
                row += "".join(f"  {metrics[name][index]:>{widths[name]}}" for name in names)
            lines.append(row)
        if self.stopped_early:
            lines.append("(stopped early)")
        return "\n".join(lines)

    def _names(self):
        names = []
        for entry in self.validation:
            names.extend(name for name in entry if name not in names)
        return names

    def __repr__(self):
        last = f", last loss {self.epoch_losses[-1]:.5g}" if self.epoch_losses else ""
        return f"<History: {len(self.epoch_losses)} epochs, {len(self.iteration_losses)} iterations{last}>"
