"""gv.rearrange: einops-style patterns against NumPy, view/copy decisions, caching and errors."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import graphview as gv


def evaluate(pattern, array, **sizes):
    g = gv.Graph()
    x = g.placeholder("x", shape=array.shape)
    y = gv.rearrange(x, pattern, **sizes)
    return g, y, g.output({"x": array}, [y])[y.name]


DATA = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)

CASES = [
    ("b h w c -> b c h w", {}, DATA.transpose(0, 3, 1, 2)),
    ("b h w c -> b (h w) c", {}, DATA.reshape(2, 12, 5)),
    ("b h w c -> b (h w c)", {}, DATA.reshape(2, 60)),
    ("b h w c -> (b h) w c", {}, DATA.reshape(6, 4, 5)),
    ("b h w c -> c h w b", {}, DATA.transpose(3, 1, 2, 0)),
    ("b h w c -> b (c h w)", {}, DATA.transpose(0, 3, 1, 2).reshape(2, 60)),
    ("b h w c -> b h w c 1", {}, DATA[..., None]),
    ("b h w c -> b () h w c", {}, DATA[:, None]),
    ("b h (w1 w2) c -> b h w1 w2 c", {"w1": 2}, DATA.reshape(2, 3, 2, 2, 5)),
    ("b h (w1 w2) c -> b (h w2) w1 c", {"w2": 2}, DATA.reshape(2, 3, 2, 2, 5).transpose(0, 1, 3, 2, 4).reshape(2, 6, 2, 5)),
    ("b h w c -> b h w c", {}, DATA),
    ("b ... c -> b c ...", {}, DATA.transpose(0, 3, 1, 2)),
    ("... c -> c ...", {}, DATA.transpose(3, 0, 1, 2)),
    ("b ... -> b (...)", {}, DATA.reshape(2, 60)),
    ("b ... c -> (b ...) c", {}, DATA.reshape(24, 5)),
    ("b h w c ... -> b ... h w c", {}, DATA),
    ("b h w c ... -> b h w c (...)", {}, DATA[..., None]),
    ("... (w1 w2) c -> ... w2 w1 c", {"w1": 2}, DATA.reshape(2, 3, 2, 2, 5).swapaxes(2, 3)),
]


@pytest.mark.parametrize("pattern,sizes,expected", CASES, ids=[c[0] for c in CASES])
def test_patterns_match_numpy(pattern, sizes, expected):
    _, _, result = evaluate(pattern, DATA, **sizes)
    np.testing.assert_array_equal(result, expected)


def test_a_unit_axis_on_the_left_is_dropped():
    _, _, result = evaluate("b 1 c -> b c", np.arange(6.0).reshape(2, 1, 3))
    np.testing.assert_array_equal(result, np.arange(6.0).reshape(2, 3))


def test_merges_are_views_of_contiguous_data_and_copies_after_a_permute():
    g = gv.Graph()
    x = g.placeholder("x", shape=(None, 3, 4, 5))
    assert gv.rearrange(x, "b h w c -> b (h w) c").op == "merge_axes"
    assert gv.rearrange(x, "b h w c -> b (c h w)").op == "merge_axes_copy"
    assert gv.rearrange(x, "b h w c -> c h w b").op == "permute"


def test_plans_are_cached_and_whitespace_does_not_matter():
    g = gv.Graph()
    x = g.placeholder("x", shape=(None, 3, 4, 5))
    first = gv.rearrange(x, "b h w c -> b (h w) c")
    count = len(g.nodes())
    assert gv.rearrange(x, "b  h w c->b (h w)  c").name == first.name
    assert len(g.nodes()) == count


def test_dynamic_sizes_merge_and_split_back_to_the_same_dims():
    g = gv.Graph()
    time, feature = gv.Dim("time"), gv.Dim("feature", 3)
    x = g.placeholder("x", dims=(gv.batch_dim, time, feature))
    merged = gv.rearrange(x, "b t f -> b (t f)")
    assert merged.shape == (None, None) and gv.dims_of(merged)[1] == time * feature
    split = gv.rearrange(merged, "b (t f) -> b t f", f=3)
    assert gv.dims_of(split) == (gv.batch_dim, time, feature)
    data = np.random.default_rng(0).random((2, 7, 3))
    values = g.output({"x": data}, [merged, split])
    np.testing.assert_array_equal(values[merged.name], data.reshape(2, 21))
    np.testing.assert_array_equal(values[split.name], data)


@pytest.mark.parametrize("pattern,sizes,match", [
    ("b h w -> b h w", {}, "names 3 axes but 'x' has 4"),
    ("b h w c -> b h w", {}, "names on one side only: \\['c'\\]"),
    ("b h h c -> b h c", {}, "h repeated on the left side"),
    ("b h w c", {}, "must look like"),
    ("b h w c -> b (h (w c))", {}, "groups cannot nest"),
    ("b h w c -> b h w c", {"q": 2}, "sizes given for \\['q'\\]"),
    ("b h (w1 w2 w3) c -> b h w1 w2 w3 c", {}, "all but one"),
    ("b h w c -> ... c", {}, "'...' on one side only \\(add it to the left side\\)"),
    ("... h ... -> h", {}, "at most once on each side"),
    ("(b ...) c -> b c ...", {}, "cannot sit in a group on the left"),
    ("a b c d e ... -> a b c d e ...", {}, "names 5 axes besides '...' but the input has 4"),
    ("b h w c -> b h w c !", {}, "unexpected '!'"),
    ("b h w c -> b h w c", {"h": 5}, "h=5 but that axis has size 3"),
])
def test_bad_patterns_say_what_is_wrong(pattern, sizes, match):
    g = gv.Graph()
    x = g.placeholder("x", shape=(2, 3, 4, 5))
    with pytest.raises(gv.PatternError, match=match):
        gv.rearrange(x, pattern, **sizes)


@settings(max_examples=25, deadline=None)
@given(st.permutations(range(4)), st.integers(0, 3), st.integers(1, 4))
def test_random_permute_and_merge_against_numpy(order, start, width):
    names = "abcd"
    stop = min(start + width, 4)
    right = [names[i] for i in order]
    grouped = right[:start] + ["(" + " ".join(right[start:stop]) + ")"] + right[stop:]
    pattern = f"a b c d -> {' '.join(grouped)}"
    _, _, result = evaluate(pattern, DATA)
    moved = DATA.transpose(order)
    expected = moved.reshape(moved.shape[:start] + (-1,) + moved.shape[stop:])
    np.testing.assert_array_equal(result, expected)


def test_gradient_check_through_split_permute_merge():
    g = gv.Graph()
    x = g.placeholder("x", shape=(2, 6, 3))
    y = gv.rearrange(x, "b (p q) c -> b (c q) p", q=2)
    g.set_loss(g.math.sum(g.math.sin(y) * g.constant("w", np.random.default_rng(1).normal(size=(2, 6, 3)))))
    report = gv.check_gradients(g, {"x": np.random.default_rng(2).normal(size=(2, 6, 3))}, wrt=["x"])
    assert report.passed, str(report)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 5), st.data())
def test_ellipsis_stands_for_the_unnamed_axes(rank, data):
    shape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
    named = data.draw(st.integers(0, rank))
    array = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    names = [f"n{i}" for i in range(named)]
    pattern = f"{' '.join(names)} ... -> ... {' '.join(reversed(names))}"
    _, _, result = evaluate(pattern, array)
    expected = np.moveaxis(array, list(range(named)), list(range(rank - 1, rank - 1 - named, -1)))
    np.testing.assert_array_equal(result, expected)


# --- reduce ----------------------------------------------------------------------------

SMALL = DATA / 50.0

REDUCE_CASES = [
    ("b h w c -> b c", "mean", {}, SMALL.mean(axis=(1, 2))),
    ("b (h h2) (w w2) c -> b h w c", "max", {"h2": 1, "w2": 2}, SMALL.reshape(2, 3, 1, 2, 2, 5).max(axis=(2, 4))),
    ("b h w c -> c b", "sum", {}, SMALL.sum(axis=(1, 2)).T),
    ("b ... c -> b c", "min", {}, SMALL.min(axis=(1, 2))),
    ("b ... -> b", "sum", {}, SMALL.sum(axis=(1, 2, 3))),
    ("b h w c -> (b c) 1", "prod", {}, SMALL.prod(axis=(1, 2)).reshape(10, 1)),
    ("... c -> c", "logsumexp", {}, np.log(np.exp(SMALL).sum(axis=(0, 1, 2)))),
    ("b h w c -> b h w c", "sum", {}, SMALL),
]


@pytest.mark.parametrize("pattern,reduction,sizes,expected", REDUCE_CASES, ids=[c[0] + " " + c[1] for c in REDUCE_CASES])
def test_reduce_patterns_match_numpy(pattern, reduction, sizes, expected):
    g = gv.Graph()
    x = g.placeholder("x", shape=SMALL.shape)
    y = gv.reduce(x, pattern, reduction, **sizes)
    np.testing.assert_allclose(g.output({"x": SMALL}, [y])[y.name], expected, rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.booleans(), min_size=4, max_size=4), st.sampled_from(["sum", "mean", "max", "min", "prod"]))
def test_reduce_over_random_axes_against_numpy(dropped, reduction):
    names = "abcd"
    pattern = f"a b c d -> {' '.join(n for n, d in zip(names, dropped) if not d)}"
    g = gv.Graph()
    x = g.placeholder("x", shape=SMALL.shape)
    y = gv.reduce(x, pattern, reduction)
    axes = tuple(i for i, d in enumerate(dropped) if d)
    expected = getattr(np, reduction)(SMALL, axis=axes) if axes else SMALL
    np.testing.assert_allclose(g.output({"x": SMALL}, [y])[y.name], expected, rtol=1e-12)


def test_reduce_over_a_dim_with_lengths_is_masked():
    g = gv.Graph()
    time, feature = gv.Dim("time"), gv.Dim("feature", 3)
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, feature), lengths={time: "seq_len"})
    pooled = gv.reduce(seq, "b t f -> f b", "mean")
    data, lengths = np.random.default_rng(5).normal(size=(2, 4, 3)), np.array([4, 1])
    result = g.output({"seq": data, "seq_len": lengths}, [pooled])[pooled.name]
    np.testing.assert_allclose(result, np.stack([data[0].mean(axis=0), data[1, :1].mean(axis=0)], axis=1))


def test_gradient_check_through_max_pooling():
    g = gv.Graph()
    x = g.placeholder("x", shape=(2, 4, 6, 3))
    pooled = gv.reduce(x, "b (h p) (w q) c -> b (h w c)", "max", p=2, q=2)
    g.set_loss(g.math.sum(g.math.sin(pooled)))
    report = gv.check_gradients(g, {"x": np.random.default_rng(6).normal(size=(2, 4, 6, 3))}, wrt=["x"])
    assert report.passed, str(report)


@pytest.mark.parametrize("pattern,reduction,match", [
    ("b h w c -> b q", "sum", r"reduce 'b h w c -> b q': \['q'\] on the right side only"),
    ("b h w c -> b c", "median", "reduction must be one of sum, mean, max, min, prod, logsumexp, not 'median'"),
    ("b h w -> b", "sum", "reduce 'b h w -> b': the left side names 3 axes but 'x' has 4"),
    ("b h w c -> b c ...", "sum", r"reduce 'b h w c -> b c \.\.\.': '\.\.\.' on one side only"),
    ("b h w c", "sum", "reduce: the pattern must look like"),
])
def test_bad_reduce_patterns_say_what_is_wrong(pattern, reduction, match):
    g = gv.Graph()
    x = g.placeholder("x", shape=(2, 3, 4, 5))
    with pytest.raises(gv.PatternError, match=match):
        gv.reduce(x, pattern, reduction)


def test_a_merged_axis_can_be_split_differently_from_how_it_was_merged():
    g = gv.Graph()
    x = g.placeholder("x", dims=(gv.batch_dim, gv.Dim("h", 3), gv.Dim("w", 4), gv.Dim("c", 5)))
    merged = gv.rearrange(x, "b h w c -> b (h w) c")
    assert gv.dims_of(gv.rearrange(merged, "b (p q) c -> b p q c", q=4))[1:3] == gv.dims_of(x)[1:3]
    halves = gv.rearrange(merged, "b (p q) c -> b p q c", p=2)
    sixes = gv.rearrange(merged, "b (p q) c -> b p q c", q=6)
    assert halves.shape == (None, 2, 6, 5) and sixes.shape == (None, 2, 6, 5)
    values = g.output({"x": DATA}, [halves, sixes])
    np.testing.assert_array_equal(values[halves.name], DATA.reshape(2, 2, 6, 5))
    np.testing.assert_array_equal(values[sixes.name], DATA.reshape(2, 2, 6, 5))


@pytest.mark.parametrize("pattern,view", [
    ("b h w c -> b c (h w)", True), ("b h w c -> (h w) b c", True), ("b h w c -> c (b h w)", True),
    ("b h w c -> (w c) (b h)", True), ("b h w c -> b (c h w)", False), ("b h w c -> b (w h) c", False),
])
def test_a_merge_after_a_permute_is_a_view_exactly_when_its_axes_were_adjacent(pattern, view):
    g = gv.Graph()
    x = g.placeholder("x", shape=(None, 3, 4, 5))
    y = gv.rearrange(x, pattern)
    merges = [node.op for node in g.nodes() if (node.op or "").startswith("merge")]
    assert set(merges) == {"merge_axes" if view else "merge_axes_copy"}
    shared = []

    class Watch(gv.Listener):
        def post_op(self, ctx, node, inputs, outputs):
            if node.op.startswith("merge"):
                shared.append(np.shares_memory(inputs[0], outputs[0]))

    result = g.output({"x": DATA}, [y], listeners=[Watch()])[y.name]
    assert shared and all(s == view for s in shared)
    left, right = pattern.split(" -> ")
    names = left.split()
    flat = [n for n in right.replace("(", " ").replace(")", " ").split()]
    expected = DATA.transpose([names.index(n) for n in flat]).reshape(result.shape)
    np.testing.assert_array_equal(result, expected)


# --- anonymous axes in reduce (einops' test_anonymous_axes, reversed as its check_reversion does) ---------

RNG = np.random.default_rng(13)

ANONYMOUS_CASES = [
    # (pattern, sizes, input shape, NumPy reference on the input reshaped to its elementary axes)
    ("(c 2 d a b) -> a b c d", {"a": 1, "c": 4, "d": 6}, (96,),
     lambda r, f: f(r.reshape(4, 2, 6, 1, 2), axis=1).transpose(2, 3, 0, 1)),
    ("(d copy 1) 3 b c -> 1 b c d", {"copy": 3}, (18, 3, 2, 4),
     lambda r, f: f(r.reshape(6, 3, 3, 2, 4), axis=(1, 2)).transpose(1, 2, 0)[None]),
    ("3 ... -> 1 ...", {}, (3, 2, 4, 6), lambda r, f: f(r, axis=0)[None]),
    ("(1 1) (1 b) 2 c 3 d (1 1) -> 1 b c d", {}, (1, 2, 2, 4, 3, 6, 1),
     lambda r, f: f(r, axis=(2, 4)).reshape(1, 2, 4, 6)),
    ("b (h 2) (w 2) -> b h w", {}, (2, 4, 6), lambda r, f: f(r.reshape(2, 2, 2, 3, 2), axis=(2, 4))),
]


@pytest.mark.parametrize("reduction", ["min", "max", "sum", "mean"])
@pytest.mark.parametrize("pattern,sizes,shape,reference", ANONYMOUS_CASES, ids=[c[0] for c in ANONYMOUS_CASES])
def test_reduce_reduces_anonymous_axes_as_einops(pattern, sizes, shape, reference, reduction):
    data = RNG.normal(size=shape)
    g = gv.Graph()
    x = g.placeholder("x", shape=shape)
    y = gv.reduce(x, pattern, reduction, **sizes)
    expected = reference(data, getattr(np, reduction))
    assert y.shape == expected.shape
    if pattern.startswith("(c 2 d a b)"):
        assert y.shape == (1, 2, 4, 6)   # einops' answer
    np.testing.assert_allclose(g.output({"x": data}, [y])[y.name], expected, rtol=1e-12)


@pytest.mark.parametrize("function,pattern,match", [
    (gv.rearrange, "a (b 2) -> a b", r"rearrange 'a \(b 2\) -> a b': anonymous axes \(2\) are for gv.reduce"),
    (gv.rearrange, "a b -> a b 3", r"anonymous axes \(3\) are for gv.reduce"),
    (lambda x, p: gv.reduce(x, p, "sum"), "a b -> a b 2", r"anonymous axes \(2\) on the right side; each number is an "
                                                          r"axis of its own, which reduce cannot create"),
    # The same number in the same position on both sides is still two axes, as in einops.
    (lambda x, p: gv.reduce(x, p, "sum"), "a 6 -> a 6", r"reduce 'a 6 -> a 6': anonymous axes \(6\) on the right side"),
    (lambda x, p: gv.reduce(x, p, "sum"), "2 6 -> 2", r"reduce '2 6 -> 2': anonymous axes \(2\) on the right side"),
    (lambda x, p: gv.reduce(x, p, "max"), "a (b 2) -> a (b 2)", r"anonymous axes \(2\) on the right side"),
    (lambda x, p: gv.reduce(x, p, "sum"), "3 b -> b", r"reduce '3 b -> b': the pattern's 3 is an axis of size 3 but "
                                                      r"that axis has size 2"),
    (lambda x, p: gv.reduce(x, p, "sum"), "a (b 0) -> a", "an anonymous axis must have a size of at least 1, not 0"),
])
def test_anonymous_axes_where_einops_refuses_them_too(function, pattern, match):
    g = gv.Graph()
    x = g.placeholder("x", shape=(2, 6))
    with pytest.raises(gv.PatternError, match=match):
        function(x, pattern)


# --- NumPy arrays, as einops takes them ---------------------------------------------------------------

@pytest.mark.parametrize("pattern,sizes,expected", CASES[:10], ids=[c[0] for c in CASES[:10]])
def test_rearrange_of_a_numpy_array_returns_the_rearranged_array(pattern, sizes, expected):
    result = gv.rearrange(DATA, pattern, **sizes)
    assert isinstance(result, np.ndarray) and result.dtype == DATA.dtype
    np.testing.assert_array_equal(result, expected)


def test_rearrange_and_reduce_of_arrays_and_lists():
    np.testing.assert_array_equal(gv.rearrange(np.ones((2, 3)), "a b -> b a"), np.ones((3, 2)))
    ints = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert gv.rearrange(ints, "a b -> (b a)").dtype == np.int32
    np.testing.assert_array_equal(gv.rearrange([[1.0, 2.0], [3.0, 4.0]], "a b -> b a"), [[1.0, 3.0], [2.0, 4.0]])
    np.testing.assert_allclose(gv.reduce(SMALL, "b (h h2) w c -> b h c", "max", h2=3), SMALL.max(axis=(1, 2))[:, None])
    np.testing.assert_array_equal(gv.reduce(ints, "a (b 3) -> a", "sum"), ints.sum(axis=1))


@pytest.mark.parametrize("value,match", [
    (None, r"rearrange 'a b -> b a': x must be a graphview Variable or an array of .*, not NoneType"),
    (np.ones((2, 3), np.uint8), "not an array of dtype uint8"),
    ([[1.0], [2.0, 3.0]], r"x must be a graphview Variable or an array, not list"),
])
def test_what_is_neither_a_variable_nor_an_array_is_named(value, match):
    with pytest.raises(gv.DTypeError, match=match):
        gv.rearrange(value, "a b -> b a")


@pytest.mark.parametrize("function", [lambda x: gv.rearrange(x, "a b -> b a"), lambda x: gv.reduce(x, "a b -> a", "sum")])
def test_a_masked_array_is_refused_as_a_placeholder_refuses_it(function):
    masked = np.ma.array(np.arange(6.0).reshape(2, 3), mask=[[0, 1, 0], [0, 0, 0]])
    with pytest.raises(gv.PlaceholderError, match="placeholder 'array' was fed a masked array, whose mask graphview "
                                                  "cannot honour"):
        function(masked)


def test_objects_numpy_reads_as_arrays_are_taken_as_numpy_takes_them():
    class Wrapped:   # what a torch tensor or a pandas frame offers
        def __array__(self, dtype=None, copy=None):
            return np.arange(6.0).reshape(2, 3)
    result = gv.reduce(Wrapped(), "a b -> b", "sum")
    assert isinstance(result, np.ndarray)
    np.testing.assert_array_equal(result, [3.0, 5.0, 7.0])
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(gv.rearrange(torch.arange(6.0).reshape(2, 3), "a b -> b a"),
                                  np.arange(6.0).reshape(2, 3).T)


def test_an_array_that_does_not_fit_the_pattern_is_a_pattern_error():
    with pytest.raises(gv.PatternError, match=r"the left side names 3 axes but 'array' has 2 \(shape \(2, 3\)\)"):
        gv.rearrange(np.ones((2, 3)), "a b c -> c b a")


@pytest.mark.parametrize("size", ["2", 2.0, None, True, -2])
def test_sizes_must_be_ints(size):
    g = gv.Graph()
    x = g.placeholder("x", shape=(2, 6))
    with pytest.raises(gv.PatternError, match=f"rearrange 'a \\(b c\\) -> a b c': b={size!r} is not a size"):
        gv.rearrange(x, "a (b c) -> a b c", b=size)
    assert gv.rearrange(x, "a (b c) -> a b c", b=np.int64(2)).shape == (2, 2, 3)


def test_an_axis_may_be_called_x_or_pattern():
    g = gv.Graph()
    v = g.placeholder("v", shape=(2, 6))
    assert gv.rearrange(v, "a (x pattern) -> a x pattern", x=3).shape == (2, 3, 2)
    assert gv.reduce(v, "a (x pattern) -> a x", "sum", pattern=2).shape == (2, 3)
    assert gv.reduce(v, "a (x pattern) -> a x", reduction="max", x=3).shape == (2, 3)
