"""Layout views (dp seed 000): conversions, aliasing, caching, batch subsets, gradients through layouts."""
import numpy as np
import pytest

import graphview as gv


class Arrays(gv.Listener):
    """Keeps every op's output array (and its inputs) of the last run, to check aliasing."""

    def __init__(self):
        self.seen = {}

    def post_op(self, ctx, node, inputs, outputs):
        self.seen[node.name] = (list(inputs), outputs[0])


def run(g, feeds, outputs):
    """(values, arrays): the returned values and the un-copied arrays each step produced."""
    listener = Arrays()
    values = g.output(feeds, outputs, listeners=[listener])
    return values, listener.seen


def images(batch=8):
    return np.random.default_rng(0).random((batch, 3, 3, 1))


# --- the examples of seed 000 ---------------------------------------------------------------------

def test_image_view_bhwc_to_chwb_and_bf_as_in_the_seed():
    g = gv.Graph()
    x = g.placeholder("images", shape=(None, 3, 3, 1))
    view = gv.ImageView("bhwc", x)
    chwb, bf = view.get("chwb", dtype="float32"), view.get("bf")
    data = images()
    values, arrays = run(g, {"images": data}, [chwb, bf])
    assert values[chwb.name].shape == (1, 3, 3, 8) and values[chwb.name].dtype == np.float32
    np.testing.assert_array_equal(values[chwb.name], data.transpose(3, 1, 2, 0).astype(np.float32))
    assert values[bf.name].shape == (8, 9)
    np.testing.assert_array_equal(values[bf.name], data.reshape(8, 9))
    # bhwc -> bf of contiguous data is a zero-copy view of the fed images
    assert np.shares_memory(arrays[bf.name][1], data)
    # the permute before the cast is zero-copy too
    permuted = g.node(chwb.name).inputs[0]
    assert np.shares_memory(arrays[permuted][1], data)


def test_float_view_defaults_to_the_input_dtype():
    g = gv.Graph()
    x = g.placeholder("images", shape=(None, 3, 3, 1), dtype="float32")
    assert gv.ImageView("bhwc", x).get("bf").dtype == np.float32


def test_class_view_bt_to_b_selects_the_primary_class():
    g = gv.Graph()
    labels = g.placeholder("labels", shape=(None, 2), dtype="int64")
    view = gv.ClassView("bt", labels)
    primary, both = view.get("b"), view.get("bt")
    data = np.array([[4, 2], [3, 1], [2, 3], [3, 4]])
    values, arrays = run(g, {"labels": data}, [primary])
    np.testing.assert_array_equal(values[primary.name], [4, 3, 2, 3])
    assert both is labels
    assert np.shares_memory(arrays[primary.name][1], data)


def test_class_view_b_to_bt_adds_an_axis():
    g = gv.Graph()
    labels = g.placeholder("labels", shape=(None,), dtype="int32")
    bt = gv.ClassView("b", labels).get("bt")
    data = np.array([4, 1, 3, 4, 1, 2, 3, 1], np.int32)
    np.testing.assert_array_equal(g.output({"labels": data}, [bt])[bt.name], data[:, None])


def test_sequence_view_bwc_to_bf_and_bcw():
    g = gv.Graph()
    x = g.placeholder("seq", shape=(None, 2, 5))
    view = gv.SequenceView("bwc", x)
    bf, bcw = view.get("bf"), view.get("bcw")
    data = np.random.default_rng(1).random((8, 2, 5))
    values, arrays = run(g, {"seq": data}, [bf, bcw])
    np.testing.assert_array_equal(values[bf.name], data.reshape(8, 10))
    np.testing.assert_array_equal(values[bcw.name], data.transpose(0, 2, 1))
    assert np.shares_memory(arrays[bcw.name][1], data)


def test_data_view_b_and_bf():
    g = gv.Graph()
    x = g.placeholder("x", shape=(None, 1))
    view = gv.DataView("bf", x)
    b = view.get("b")
    data = np.arange(4.0).reshape(4, 1)
    values, arrays = run(g, {"x": data}, [b])
    np.testing.assert_array_equal(values[b.name], data[:, 0])
    assert np.shares_memory(arrays[b.name][1], data)
    back = gv.DataView("b", b).get("bf")
    assert back.shape == (None, 1)


# --- views, copies and caching ----------------------------------------------------------------------

def test_every_image_conversion_matches_numpy():
    data = np.random.default_rng(2).random((2, 3, 4, 5))
    order = {"bhwc": "bhwc", "bchw": "bchw", "chwb": "chwb"}
    for base in order:
        g = gv.Graph()
        array = np.ascontiguousarray(np.einsum(f"bhwc->{base}", data))
        x = g.placeholder("x", shape=array.shape)
        view = gv.ImageView(base, x)
        for target in ("bhwc", "bchw", "chwb", "bf"):
            result = view.get(target)
            got = g.output({"x": array}, [result])[result.name]
            expected = np.einsum(f"bhwc->{target}", data) if target != "bf" else \
                np.moveaxis(array, base.index("b"), 0).reshape(2, -1)
            np.testing.assert_array_equal(got, expected, err_msg=f"{base} -> {target}")


def test_a_merge_is_a_view_when_its_axes_stay_adjacent_and_explain_says_which():
    g = gv.Graph()
    x = g.placeholder("x", shape=(3, 4, 2, None))
    bf = gv.ImageView("chwb", x).get("bf")          # b moves to the front; c, h, w stay adjacent
    assert bf.op == "merge_axes"
    steps = [line.split() for line in g.explain(bf).splitlines()[2:]]
    assert steps[0][:3] == ["view", "permute", "="] and steps[1][:3] == ["view", "merge_axes", "="]
    cropped = gv.ImageView("bhwc", g.placeholder("y", shape=(None, 4, 4, 2))[:, 1:3]).get("bf")
    assert cropped.op == "merge_axes_copy"
    assert [line.split()[:2] for line in g.explain(cropped).splitlines()[2:]][-1] == ["kernel", "merge_axes_copy"]
    data = np.random.default_rng(3).random((3, 4, 2, 5))
    values, arrays = run(g, {"x": data}, [bf])
    np.testing.assert_array_equal(values[bf.name], data.transpose(3, 0, 1, 2).reshape(5, -1))
    assert np.shares_memory(arrays[bf.name][1], data)


def test_conversions_are_cached_per_layout_and_dtype():
    g = gv.Graph()
    x = g.placeholder("images", shape=(None, 32, 32, 3))
    view = gv.ImageView("bhwc", x)
    a = view.get("bchw")
    assert view.get("bchw") is a and view.get("bchw", dtype="float64") is a
    c = view.get("chwb", dtype="float32")
    assert view.get("chwb", dtype=np.float32) is c and view.get("chwb") is not c
    count = len(g.nodes())
    view.get("bchw"), view.get("chwb", "float32"), view.get("bf")
    view.get("bf")
    assert len(g.nodes()) == count + 1
    assert view.conversions() == [("bchw", "float64"), ("chwb", "float64"), ("chwb", "float32"), ("bf", "float64")]
    # a second view of the same input shares the compiled plans
    assert gv.ImageView("bhwc", x).get("bchw").name == a.name
    assert gv.rearrange(x, "b h w c -> b c h w").name == a.name


def test_impossible_conversions_name_both_layouts():
    g = gv.Graph()
    view = gv.ImageView("bf", g.placeholder("x", shape=(None, 12)))
    with pytest.raises(gv.LayoutError, match="cannot convert 'bf' to 'bhwc'"):
        view.get("bhwc")
    data = gv.DataView("bf", g.placeholder("y", shape=(None, 3)))
    with pytest.raises(gv.LayoutError, match="cannot convert 'bf' to 'b'.*size 3, not 1"):
        data.get("b")
    with pytest.raises(gv.LayoutError, match="unknown layout 'bt'.*'bhwc', 'bchw', 'chwb', 'bf'"):
        gv.ImageView("bhwc", g.placeholder("z", shape=(None, 2, 2, 1))).get("bt")
    with pytest.raises(gv.LayoutError, match="layout 'bhwc' has 4 axes"):
        gv.ImageView("bhwc", g.placeholder("w", shape=(None, 2)))


def test_views_carry_dims():
    g = gv.Graph()
    h, w, c = gv.Dim("h", 3), gv.Dim("w", 4), gv.Dim("c", 2)
    x = g.placeholder("x", dims=(gv.batch_dim, h, w, c))
    view = gv.ImageView("bhwc", x)
    assert gv.dims_of(view.get("chwb")) == (c, h, w, gv.batch_dim)
    assert gv.dims_of(view.get("bf")) == (gv.batch_dim, h * w * c)
    assert gv.dims_of(gv.rearrange(view.get("bf"), "b (h w c) -> b h w c", h=3, w=4)) == (gv.batch_dim, h, w, c)


# --- batch subsets ------------------------------------------------------------------------------------

def test_sub_is_a_view_of_the_batch_range_and_keeps_the_kind():
    g = gv.Graph()
    x = g.placeholder("x", shape=(None, 3, 3, 1))
    part = gv.ImageView("chwb", g.shape.permute(x, 3, 1, 2, 0)).sub(2, 5)
    assert isinstance(part, gv.ImageView) and part.layout == "chwb"
    bhwc = part.get("bhwc")
    data = images()
    values, arrays = run(g, {"x": data}, [bhwc, part.input])
    np.testing.assert_array_equal(values[bhwc.name], data[2:5])
    assert np.shares_memory(arrays[part.input.name][1], data)


def test_index_gathers_examples():
    g = gv.Graph()
    x = g.placeholder("x", shape=(None, 3, 3, 1))
    picked = gv.ImageView("bhwc", x).index(np.array([5, 0, 5]))
    bf = picked.get("bf")
    data = images()
    np.testing.assert_array_equal(g.output({"x": data}, [bf])[bf.name], data[[5, 0, 5]].reshape(3, 9))


def test_list_view_is_a_working_composite():
    g = gv.Graph()
    inputs = gv.ImageView("bhwc", g.placeholder("x", shape=(None, 3, 3, 1)))
    targets = gv.ClassView("bt", g.placeholder("y", shape=(None, 2), dtype="int64"))
    both = gv.ListView([inputs, targets])
    bf, b = both.get(["bf", "b"])
    assert bf is inputs.get("bf") and b is targets.get("b")
    assert [v.name for v in both.get(None)] == ["x", "y"]
    part = both.sub(1, 3)
    assert len(part) == 2 and isinstance(part[1], gv.ClassView)
    x, y = part.get(["bf", "b"])
    data, labels = images(), np.arange(16).reshape(8, 2)
    values = g.output({"x": data, "y": labels}, [x, y])
    np.testing.assert_array_equal(values[x.name], data[1:3].reshape(2, 9))
    np.testing.assert_array_equal(values[y.name], labels[1:3, 0])
    with pytest.raises(gv.LayoutError, match="2 layouts for 3 views"):
        gv.ListView([inputs, targets, inputs]).get(["bf", "b"])


# --- gradients through layouts (dp's backwardPut / backwardGet) ------------------------------------------

def test_gradients_of_several_layouts_sum_into_the_base():
    g = gv.Graph()
    x = g.placeholder("x", shape=(3, 2, 2, 2))
    view = gv.ImageView("bhwc", x)
    w1 = g.var("w1", np.random.default_rng(4).normal(size=(8, 2)))
    w2 = g.var("w2", np.random.default_rng(5).normal(size=(2, 2, 2, 3)))
    a = g.math.sum(g.math.tanh(view.get("bf") @ w1))                          # bf consumer
    b = g.math.sum(g.math.square(view.get("chwb")) * w2)                      # chwb consumer
    c = g.math.sum(g.math.sin(view.get("bchw")))                               # bchw consumer
    g.set_loss(a + b + c)
    data = np.random.default_rng(6).normal(size=(3, 2, 2, 2))
    report = gv.check_gradients(g, {"x": data}, wrt=["x", "w1", "w2"])
    assert report.passed, str(report)
    grads = g.calculate_gradients({"x": data}, ["x"])["x"]
    w2v = g.value("w2")
    expected = (1 - np.tanh(data.reshape(3, 8) @ g.value("w1")) ** 2) @ g.value("w1").T
    expected = expected.reshape(data.shape) + np.cos(data)
    expected += 2 * data * np.transpose(w2v, (3, 1, 2, 0))
    np.testing.assert_allclose(grads, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("base,target", [("bhwc", "bf"), ("chwb", "bf"), ("bhwc", "chwb"), ("bchw", "bhwc")])
def test_gradient_checks_through_each_image_conversion(base, target):
    g = gv.Graph()
    x = g.placeholder("x", shape=(2, 3, 2, 2))
    view = gv.ImageView(base, x)
    out = view.get(target, dtype="float64")
    weights = g.constant("weights", np.random.default_rng(7).normal(size=out.shape))
    g.set_loss(g.math.sum(g.math.square(out) * weights))
    report = gv.check_gradients(g, {"x": np.random.default_rng(8).normal(size=(2, 3, 2, 2))}, wrt=["x"])
    assert report.passed, str(report)


def test_gradient_checks_through_sub_index_and_sequence_views():
    g = gv.Graph()
    x = g.placeholder("x", shape=(4, 3, 2))
    view = gv.SequenceView("bwc", x)
    loss = g.math.sum(g.math.square(view.sub(1, 3).get("bf"))) + g.math.sum(
        g.math.sin(view.index(np.array([3, 3, 0])).get("bcw"))) + g.math.sum(g.math.exp(view.get("bf")))
    g.set_loss(loss)
    report = gv.check_gradients(g, {"x": np.random.default_rng(9).normal(size=(4, 3, 2))}, wrt=["x"])
    assert report.passed, str(report)


def test_the_example_runs_and_its_gradients_check(capsys):
    import pathlib
    import runpy
    path = pathlib.Path(__file__).resolve().parent.parent / "examples" / "layouts.py"
    runpy.run_path(str(path), run_name="__main__")
    assert "PASSED" in capsys.readouterr().out


def test_batch_subsets_of_sequences_carry_their_own_lengths():
    g = gv.Graph()
    time = gv.Dim("time")
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, gv.Dim("feature", 4)), lengths={time: "seq_len"})
    view = gv.SequenceView("bwc", seq)
    first_two = view.sub(0, 2).get("bwc")
    picked = view.index([2, 0]).get("bwc")                 # a plain list of indices is fine too
    assert gv.dims_of(first_two)[1].name == "time[0:2]" and gv.dims_of(first_two)[1] != time
    pooled, picked_pooled = g.math.mean(first_two, axis=time), g.math.mean(picked, axis=time)
    assert pooled.op == picked_pooled.op == "masked_mean"
    data = np.random.default_rng(4).normal(size=(3, 5, 4))
    lengths = np.array([5, 2, 1])
    padded = data.copy()
    for b, n in enumerate(lengths):
        padded[b, n:] = np.nan
    values = g.output({"seq": padded, "seq_len": lengths}, [pooled, picked_pooled])
    np.testing.assert_allclose(values[pooled.name], [data[0].mean(axis=0), data[1, :2].mean(axis=0)])
    np.testing.assert_allclose(values[picked_pooled.name], [data[2, :1].mean(axis=0), data[0].mean(axis=0)])


def test_a_merge_of_a_strided_view_is_a_copy_and_explain_says_so():
    g = gv.Graph()
    x = g.placeholder("images", (None, 8, 8, 3))
    cropped = gv.ImageView("bhwc", x[:, 2:6, 2:6, :]).get("bf")
    assert cropped.op == "merge_axes_copy"
    assert "kernel   merge_axes_copy" in g.explain([cropped])
    rows = gv.ImageView("bhwc", x).sub(1, 3).get("bf")        # a batch range of contiguous data: a view
    assert rows.op == "merge_axes"
    data = np.arange(4 * 8 * 8 * 3, dtype=np.float64).reshape(4, 8, 8, 3)
    values = g.output({"images": data}, [cropped, rows])
    np.testing.assert_array_equal(values[cropped.name], data[:, 2:6, 2:6, :].reshape(4, -1))
    np.testing.assert_array_equal(values[rows.name], data[1:3].reshape(2, -1))


def test_a_strided_view_on_an_unknown_axis_is_never_taken_for_contiguous():
    g = gv.Graph()
    x = g.placeholder("x", (None, 3))
    every_eighth = gv.rearrange(g.create_view(x, gv.interval(0, 100, 8)), "a b -> (a b)")
    leading = gv.rearrange(g.create_view(x, gv.interval(0, 100, 1)), "a b -> (a b)")
    assert every_eighth.op == "merge_axes_copy" and leading.op == "merge_axes"
    data = np.arange(60.0).reshape(20, 3)
    values = g.output({"x": data}, [every_eighth, leading])
    np.testing.assert_array_equal(values[every_eighth.name], data[0:100:8].reshape(-1))
    np.testing.assert_array_equal(values[leading.name], data.reshape(-1))
