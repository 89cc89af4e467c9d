"""Layout views (dp's Views): ask a tensor for the axis layout and dtype you need.

Axis letters: b batch, f feature, t class, c channel, h height, w width, d depth.
A view wraps one graph variable in its base layout; ``view.get(layout, dtype)``
returns a variable in the requested layout, built from view ops (permutes,
selects and squeezes are zero-copy; a merge into 'bf' is a view when the merged
axes are adjacent in memory and a copy otherwise) followed by a cast when the
dtype differs.
Each conversion is compiled by :func:`graphview.rearrange.rearrange` and cached
per (layout, dtype), so asking twice gives the same variable. Gradients need no
code here: each conversion is an op with a gradient rule, and autodiff sums the
gradients of every layout taken from the base (dp's backwardGet).
"""
import numpy as np

from graphview.dims import batch_dim
from graphview.dtypes import as_dtype
from graphview.errors import GraphviewError
from graphview.layouts import table
from graphview.ops.math import cast
from graphview.ops.view import gather
from graphview.rearrange import rearrange
from graphview.registry import default_graph
from graphview.variable import Variable

AXIS_LETTERS = {"b": "batch", "f": "feature", "t": "class", "c": "channel", "h": "height", "w": "width",
                "d": "depth"}


class LayoutError(GraphviewError, ValueError):
    """A layout a view does not know, or a conversion between two layouts that is impossible."""


class DataView:
    """A tensor of examples in layout 'b' or 'bf'."""

    LAYOUTS = ("b", "bf")

    def __init__(self, layout, input):
        kind = type(self).__name__
        if not isinstance(input, Variable):
            raise LayoutError(f"{kind}: the input must be a graph variable, not {type(input).__name__}")
        self._check(layout)
        if len(layout) != len(input.shape):
            raise LayoutError(f"{kind}: layout {layout!r} has {len(layout)} axes but {input.name!r} has shape "
                              f"{input.shape}")
        self.layout = layout
        self.input = input
        self._cache = {}
        dims = list(table.dims_of(input))
        if dims[layout.index("b")] is None:
            dims[layout.index("b")] = batch_dim
            table.set_dims(input, dims)

    def _check(self, layout):
        if not isinstance(layout, str) or layout not in self.LAYOUTS:
            letters = ", ".join(f"{k} {v}" for k, v in AXIS_LETTERS.items())
            raise LayoutError(f"{type(self).__name__}: unknown layout {layout!r}; it supports "
                              f"{', '.join(map(repr, self.LAYOUTS))} (axis letters: {letters})")

    @property
    def graph(self):
        return self.input.graph

    def get(self, layout, dtype=None):
        """The input in ``layout`` and ``dtype`` (default: the input's), built once and cached per (layout, dtype)."""
        self._check(layout)
        base = self.input.dtype.name
        dtype = base if dtype is None else as_dtype(dtype, f"{type(self).__name__}.get").name
        key = (layout, dtype)
        if key in self._cache:
            return self._cache[key]
        token = default_graph.set(self.graph)
        try:
            if dtype == base:
                result = self.input if layout == self.layout else self._convert(layout)
            else:
                result = self.get(layout)
                if result.dtype.name != dtype:
                    result = cast(result, dtype)
        finally:
            default_graph.reset(token)
        self._cache[key] = result
        return result

    forward = get

    def conversions(self):
        """The cached (layout, dtype) conversions, in the order they were first asked for."""
        return list(self._cache)

    def _impossible(self, layout, why):
        return LayoutError(f"{type(self).__name__}: cannot convert {self.layout!r} to {layout!r}: {why}")

    def _convert(self, layout):
        base = self.layout
        spaced = " ".join(base)
        if sorted(layout) == sorted(base):
            return rearrange(self.input, f"{spaced} -> {' '.join(layout)}")
        if layout == "bf":
            if base == "b":
                return rearrange(self.input, "b -> b 1")
            rest = " ".join(a for a in base if a != "b")
            return rearrange(self.input, f"{spaced} -> b ({rest})")
        if layout == "b":
            if base == "bf":
                size = self.input.shape[1]
                if size != 1:
                    raise self._impossible(layout, f"axis f has size {'unknown' if size is None else size}, not 1")
                return rearrange(self.input, "b 1 -> b")
        raise self._impossible(layout, f"a view is converted only from its most expanded layout; "
                                       f"{type(self).__name__} supports {', '.join(map(repr, self.LAYOUTS))}")

    # --- batch subsets (dp's sub and index) ------------------------------------------------

    def sub(self, start, stop):
        """A view of the same kind on examples [start, stop) of the batch axis: a zero-copy view."""
        axis = self.layout.index("b")
        key = [slice(None)] * len(self.layout)
        key[axis] = slice(start, stop)
        token = default_graph.set(self.graph)
        try:
            part = self.input[tuple(key)]
            table.subset_dims(self.input, part, f"{start}:{stop}", lambda lengths: lengths[start:stop])
        finally:
            default_graph.reset(token)
        return type(self)(self.layout, part)

    def index(self, indices):
        """A view of the same kind on the examples at ``indices`` of the batch axis: a gather (a copy)."""
        if isinstance(indices, (list, tuple)):
            indices = np.asarray(indices, dtype=np.int64)
        token = default_graph.set(self.graph)
        try:
            picked = gather(self.input, indices, axis=self.layout.index("b"))
            table.subset_dims(self.input, picked, "index", lambda lengths: gather(lengths, indices))
        finally:
            default_graph.reset(token)
        return type(self)(self.layout, picked)

    def __repr__(self):
        return f"<{type(self).__name__} {self.layout!r} of {self.input.name!r} shape={self.input.shape}>"


class ImageView(DataView):
    """A batch of images in layout 'bhwc', 'bchw' or 'chwb', viewable as 'bf'."""

    LAYOUTS = ("bhwc", "bchw", "chwb", "bf")


class SequenceView(DataView):
    """A batch of sequences in layout 'bwc' or 'bcw', viewable as 'bf'."""

    LAYOUTS = ("bwc", "bcw", "bf")


class ClassView(DataView):
    """Class indices in layout 'b', or 'bt' (several classes per example, the primary one first)."""

    LAYOUTS = ("b", "bt")

    def _convert(self, layout):
        if self.layout == "bt" and layout == "b":
            # dp's Select: the first column holds the primary class (a zero-copy view).
            column = self.input[:, 0]
            table.set_dims(column, table.dims_of(self.input)[:1])
            return column
        if self.layout == "b" and layout == "bt":
            return rearrange(self.input, "b -> b 1")
        raise self._impossible(layout, "ClassView converts between 'b' and 'bt'")


class ListView:
    """A composite of views (several inputs or targets) that is asked for layouts all at once."""

    def __init__(self, views):
        views = list(views)
        for position, view in enumerate(views):
            if not isinstance(view, (DataView, ListView)):
                raise LayoutError(f"ListView: item {position} is a {type(view).__name__}, not a view")
        self.views = views

    def get(self, layouts, dtype=None):
        """A list with each view's variable: one layout for all, or one layout per view."""
        if isinstance(layouts, str) or layouts is None:
            layouts = [layouts] * len(self.views)
        layouts = list(layouts)
        if len(layouts) != len(self.views):
            raise LayoutError(f"ListView: {len(layouts)} layouts for {len(self.views)} views")
        dtypes = list(dtype) if isinstance(dtype, (list, tuple)) else [dtype] * len(self.views)
        return [view.get(layout or getattr(view, "layout", None), kind)
                for view, layout, kind in zip(self.views, layouts, dtypes)]

    forward = get

    def sub(self, start, stop):
        return ListView(view.sub(start, stop) for view in self.views)

    def index(self, indices):
        return ListView(view.index(indices) for view in self.views)

    def __len__(self):
        return len(self.views)

    def __getitem__(self, position):
        return self.views[position]

    def __iter__(self):
        return iter(self.views)

    def __repr__(self):
        return f"<ListView of {len(self.views)} views>"
