"""``gv.Sequential``: layers applied in order, as BigDL's and Keras' Sequential (ADR 0023)."""
from graphview.errors import GraphviewError
from graphview.layers.base import Layer


class Sequential(Layer):
    """The layers in order, each fed the previous one's output; a layer itself (call it, nest it, share
    it). ``seed`` seeds the initial values of every layer inside that has no seed of its own. Layers can
    be added one by one with :meth:`add` (BigDL's ``Sequential().add(layer)``) until the first call."""

    def __init__(self, layers=(), name=None, seed=None):
        super().__init__(name=name, seed=seed)
        self.layers = []
        for layer in layers:
            self.add(layer)

    def add(self, layer):
        """Append ``layer``; returns the Sequential, so that adds chain."""
        if not isinstance(layer, Layer):
            raise GraphviewError(f"Sequential: {layer!r} is a {type(layer).__name__}, not a graphview layer")
        if self.graph is not None:
            raise GraphviewError(f"{self.describe()} has been called already; its layers are fixed")
        if layer is self or layer in self.layers:
            raise GraphviewError(f"Sequential: {layer!r} is in it already; to apply a layer twice, call it")
        self.layers.append(layer)
        return self

    def children(self):
        return list(self.layers)

    def forward(self, x):
        if not self.layers:
            raise GraphviewError(f"{self.describe()} has no layers: give a list or add some first")
        for layer in self.layers:
            x = layer(x)
        return x

    def __len__(self):
        return len(self.layers)

    def __getitem__(self, index):
        return self.layers[index]
