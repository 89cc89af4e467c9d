"""CreateView descriptors: layouts, decoder errors, and NumPy basic-indexing semantics (Hypothesis)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import graphview as gv
from graphview import indexing


# --- layouts and the decoder --------------------------------------------------------

def test_constructors_emit_the_contract_layouts():
    cases = [(gv.point(-3), [0, 1, 1, -3, 1]), (gv.interval(1, 5, 2), [1, 2, 1, 1, 5, 2, 0]),
             (gv.interval(0, -1, 1, inclusive=True), [1, 2, 1, 0, -1, 1, 1]), (gv.all(), [2, 0, 1, 1]),
             (gv.new_axis(), [3, 1, 10, 1])]
    for array, expected in cases:
        assert array.dtype == np.int64 and array.ndim == 1
        assert array.tolist() == expected
    assert (indexing.POINT, indexing.INTERVAL, indexing.ALL, indexing.NEW_AXIS) == (0, 1, 2, 3)


def test_decode_reads_every_type_and_both_new_axis_forms():
    assert indexing.decode(gv.point(4)) == indexing.Index(indexing.POINT, start=4)
    assert indexing.decode(gv.interval(1, 9, -2, True)) == indexing.Index(indexing.INTERVAL, 1, 9, -2, True)
    assert indexing.decode(gv.all()).kind == indexing.ALL
    assert indexing.decode(gv.new_axis()).kind == indexing.NEW_AXIS
    assert indexing.decode(np.array([3, 1, 1, 0, 1], np.int64)).kind == indexing.NEW_AXIS


@pytest.mark.parametrize("array, message", [
    ([0, 1, 1, 2, 1], "expected an int64 NumPy array"),
    (np.array([0, 1, 1, 2, 1], np.int32), "dtype is int32, it must be int64"),
    (np.array([[0, 1, 1, 2, 1]], np.int64), r"has shape \(1, 5\), it must be 1-D"),
    (np.zeros(0, np.int64), "is empty; field 0 \\(type\\)"),
    (np.array([7, 1, 1, 2, 1], np.int64), "field 0 \\(type\\) is 7"),
    (np.array([0, 1, 1, 2], np.int64), "a point descriptor has 5 fields, this one has 4"),
    (np.array([0, 2, 1, 2, 1], np.int64), "field 1 \\(count\\) of a point is 2"),
    (np.array([1, 2, 3, 0, 4, 1, 0], np.int64), "field 2 \\(header stride\\) of an interval is 3"),
    (np.array([1, 2, 1, 0, 4, 1, 2], np.int64), "field 6 \\(inclusive\\) is 2"),
    (np.array([1, 2, 1, 0, 4, 0, 0], np.int64), "field 5 \\(stride\\) of an interval is 0"),
    (np.array([3, 1, 1, 5, 1], np.int64), "field 3 of libnd4j's new axis form is 5"),
    (np.array([3, 1, 9, 1], np.int64), "field 2 \\(header stride\\) of a new axis is 9; it must be 10"),
    (np.array([2, 0, 1, 1, 0], np.int64), "an all descriptor has 4 fields, this one has 5"),
])
def test_malformed_descriptors_name_the_position_and_field(array, message):
    with pytest.raises(gv.IndexDescriptorError, match=f"descriptor 2: {message}"):
        indexing.decode(array, 2)


def test_descriptor_error_is_a_graphview_error_and_an_index_error():
    assert issubclass(gv.IndexDescriptorError, gv.GraphviewError)
    assert issubclass(gv.IndexDescriptorError, IndexError)


def test_constructor_arguments_are_checked():
    with pytest.raises(gv.IndexDescriptorError, match="stride must not be 0"):
        gv.interval(0, 3, 0)
    with pytest.raises(gv.IndexDescriptorError, match="offset must be an int"):
        gv.point(1.5)
    with pytest.raises(gv.IndexDescriptorError, match="does not fit in int64"):
        gv.point(1 << 70)


@given(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), min_size=0, max_size=9), st.integers(0, 3),
       st.lists(st.integers(0, 6), min_size=0, max_size=4))
@settings(max_examples=150, deadline=None)
def test_decoder_fuzz_gives_a_valid_view_or_a_descriptor_error(values, kind, shape):
    """Random int64 arrays (biased toward valid headers): a NumPy-equal view or IndexDescriptorError."""
    if values:
        values[0] = kind if values[0] % 2 else values[0]
    array = np.array(values, dtype=np.int64)
    base = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    try:
        index = indexing.decode(array, 0)
        view = indexing.view(base, [index])
    except gv.IndexDescriptorError:
        return
    assert np.shares_memory(view, base) or view.size == 0 or base.size == 0
    np.testing.assert_array_equal(view, base[numpy_key([index], base.shape)])


# --- semantics against NumPy basic indexing ---------------------------------------------

def numpy_key(indices, shape):
    """The NumPy key for decoded descriptors, written from the contract (not from graphview's resolver)."""
    key, axis = [], 0
    for index in indices:
        if index.kind == indexing.NEW_AXIS:
            key.append(None)
            continue
        size = shape[axis]
        axis += 1
        if index.kind == indexing.POINT:
            key.append(index.start)
        elif index.kind == indexing.ALL:
            key.append(slice(None))
        elif not index.inclusive:
            key.append(slice(index.start, index.end, index.stride))
        else:
            end = (index.end + size if index.end < 0 else index.end) + (1 if index.stride > 0 else -1)
            key.append(slice(index.start, end if end >= 0 else (0 if index.stride > 0 else None), index.stride))
    return tuple(key) + (Ellipsis,)


@st.composite
def bases(draw):
    """A float64 array of rank 0-5, possibly a strided, transposed or negative-stride view."""
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=5)))
    layout = draw(st.sampled_from(["contiguous", "transposed", "strided", "reversed"]))
    data = np.arange(1, 1 + int(np.prod(shape, dtype=np.int64)), dtype=np.float64)
    if layout == "transposed":
        return data.reshape(shape[::-1]).T
    if layout == "strided" and shape:
        doubled = np.arange(1, 1 + 2 * int(np.prod(shape, dtype=np.int64)), dtype=np.float64)
        return doubled.reshape((shape[0] * 2,) + shape[1:])[::2]
    if layout == "reversed" and shape:
        return data.reshape(shape)[::-1, ...]
    return data.reshape(shape)


@st.composite
def descriptor_lists(draw, shape):
    descriptors, axis = [], 0
    while True:
        choice = draw(st.sampled_from(["stop", "point", "interval", "all", "new_axis"] if axis < len(shape)
                                      else ["stop", "new_axis"]))
        if choice == "stop" or len(descriptors) > 7:
            return descriptors
        if choice == "new_axis":
            descriptors.append(gv.new_axis())
            continue
        size = shape[axis]
        axis += 1
        if choice == "point":
            if size == 0:
                descriptors.append(gv.all())
            else:
                descriptors.append(gv.point(draw(st.integers(-size, size - 1))))
        elif choice == "all":
            descriptors.append(gv.all())
        else:
            bound = st.integers(-size - 3, size + 3)
            stride = draw(st.integers(-4, 4).filter(lambda s: s != 0))
            descriptors.append(gv.interval(draw(bound), draw(bound), stride, draw(st.booleans())))


@given(st.data())
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_views_equal_numpy_basic_indexing_and_share_memory(data):
    base = data.draw(bases())
    descriptors = data.draw(descriptor_lists(base.shape))
    indices = [indexing.decode(d, i) for i, d in enumerate(descriptors)]
    view = indexing.view(base, indices)
    expected = base[numpy_key(indices, base.shape)]
    assert view.shape == expected.shape
    np.testing.assert_array_equal(view, expected)
    if view.size:
        assert np.shares_memory(view, base)
        # The resolver's strides and offset are exactly those of the view it builds.
        layout = indexing.resolve(indices, base.shape, base.strides)
        assert layout.shape == view.shape
        assert all(s == v for s, v, n in zip(layout.strides, view.strides, view.shape) if n > 1)
        offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        assert offset == layout.offset


@given(st.data())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_graph_create_view_and_getitem_match_numpy(data):
    base = data.draw(bases())
    descriptors = data.draw(descriptor_lists(base.shape))
    indices = [indexing.decode(d) for d in descriptors]
    expected = base[numpy_key(indices, base.shape)]
    g = gv.Graph()
    x = g.placeholder("x", base.shape)
    view = g.create_view(x, *descriptors)
    assert view.shape == expected.shape
    result = g.output({"x": base}, [view])[view.name]
    np.testing.assert_array_equal(result, expected)


def test_inclusive_interval_to_minus_one_is_the_whole_axis():
    a = np.arange(5.0)
    for stride in (1, 2, 3):
        view = indexing.view(a, [indexing.decode(gv.interval(0, -1, stride, inclusive=True))])
        np.testing.assert_array_equal(view, a[::stride])
    reverse = indexing.view(a, [indexing.decode(gv.interval(-1, 0, -1, inclusive=True))])
    np.testing.assert_array_equal(reverse, a[::-1])


@pytest.mark.parametrize("descriptors, message", [
    ([gv.point(4)], "descriptor 0: field 3 \\(offset\\) point\\(4\\) is out of range for axis 0 of size 4"),
    ([gv.all(), gv.point(-7)], "descriptor 1: field 3 \\(offset\\) point\\(-7\\) is out of range for axis 1"),
    ([gv.all(), gv.all(), gv.point(0)], "3 descriptors index 3 axes, but the input has only 2"),
])
def test_out_of_range_descriptors_raise(descriptors, message):
    base = np.zeros((4, 6))
    with pytest.raises(gv.IndexDescriptorError, match=message):
        indexing.view(base, [indexing.decode(d, i) for i, d in enumerate(descriptors)])


def test_numpy_keys_become_descriptors():
    descriptors, bad = indexing.from_numpy_key((1, slice(None, None, -2), None, Ellipsis), 3)
    assert bad is None
    assert [d.tolist() for d in descriptors] == [[0, 1, 1, 1, 1], [1, 2, 1, -1, 0, -2, 1], [3, 1, 10, 1],
                                                 [2, 0, 1, 1]]
    assert indexing.from_numpy_key([0, 1], 2) == (None, [0, 1])
    with pytest.raises(gv.IndexDescriptorError, match="single ellipsis"):
        indexing.from_numpy_key((Ellipsis, Ellipsis), 2)


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_slices_translate_exactly(data):
    size = data.draw(st.integers(0, 7))
    bound = st.one_of(st.none(), st.integers(-10, 10))
    item = slice(data.draw(bound), data.draw(bound), data.draw(st.one_of(st.none(), st.integers(-3, 3).filter(bool))))
    a = np.arange(float(size))
    (descriptor,), _ = indexing.from_numpy_key(item, 1)
    np.testing.assert_array_equal(indexing.view(a, [indexing.decode(descriptor)]), a[item])
