"""RETURNN's dim identities (issue 16) with identity-based equality: equal forms are one object."""
import pytest
from hypothesis import given, settings, strategies as st

import graphview as gv
from graphview.dims import factors, product


def dims():
    return gv.Dim("a"), gv.Dim("b", 3), gv.Dim("c", 2)


def test_returnn_identities_hold_as_identity():
    a, b, c = dims()
    assert (a + b) * c is a * c + b * c          # a merged concatenation is the concatenated merges
    assert a * b // b is a
    assert 2 * a is a + a
    assert 2 * a != a * 2 and a * 2 + a * 2 is 2 * (a * 2)
    assert a + b != b + a and a * b != b * a     # the order of concatenation and merging matters


def test_more_identities():
    a, b, c = dims()
    assert (a * c + b * c) // c is a + b
    assert (a - b) + b is a and (a + b) - b is a
    assert 2 * (a + b) is (a + b) + (a + b)
    assert a + a + a is 3 * a and 3 * a - a is 2 * a
    assert (a * 6) // 2 is a * 3 and ((a * 2) * 3) is a * 6
    assert (a + 1) * c is a * c + c and (1 + a) - 1 is a
    assert (a + b) * (b + c) is a * (b + c) + b * (b + c)
    assert c * (a + b) != c * a + c * b           # c outer: each c block holds a then b


def test_sizes_follow_the_arithmetic():
    a, b, c = gv.Dim("a", 5), gv.Dim("b", 3), gv.Dim("c", 2)
    assert ((a + b) * c).size == 16 and (2 * (a + b)).size == 16 and (a * b // b).size == 5
    assert ((a + b) * gv.Dim("t")).size is None


def test_identities_follow_declared_sameness():
    a, a2, b, c = gv.Dim("a", 4), gv.Dim("a2", 4), gv.Dim("b", 2), gv.Dim("c", 3)
    left = (a + b) * c
    a.declare_same_as(a2)
    assert a2 * c + b * c == left and (a2 + b) * c == left
    assert left // c == a2 + b


def test_factors_split_a_distributed_merge_back():
    a, b, c = dims()
    assert factors((a + b) * c, 2) == (a + b, c)
    assert factors(a * b * c, 3) == (a, b, c)
    assert factors(a * 2, 2) is None and factors(a + b, 2) is None


def test_merges_in_a_graph_use_the_same_dim():
    g = gv.Graph()
    a, b, c = gv.Dim("a", 2), gv.Dim("b", 3), gv.Dim("c", 4)
    x = g.placeholder("x", dims=(gv.batch_dim, a + b, c))
    merged = gv.rearrange(x, "b s c -> b (s c)")
    assert gv.dims_of(merged)[1] is a * c + b * c
    assert gv.dims_of(gv.rearrange(merged, "b (s c) -> b s c"))[1:] == (a + b, c)


def test_errors_are_unchanged():
    a, b = gv.Dim("a", 2), gv.Dim("b", 3)
    with pytest.raises(gv.DimError, match="empty dim"):
        a - a
    with pytest.raises(gv.DimError, match="negative size"):
        a - b
    with pytest.raises(gv.ShapeError, match="not a multiple"):
        b // a


_ATOMS = [gv.Dim("p"), gv.Dim("q", 2), gv.Dim("r", 3), gv.Dim("s")]


def _expressions():
    leaf = st.sampled_from(_ATOMS)
    return st.recursive(leaf, lambda inner: st.one_of(
        st.tuples(st.just("+"), inner, inner), st.tuples(st.just("*"), inner, inner),
        st.tuples(st.just("k*"), st.integers(2, 3), inner)), max_leaves=5)


def _build(expression):
    if isinstance(expression, gv.Dim):
        return expression
    operation, left, right = expression
    if operation == "+":
        return _build(left) + _build(right)
    if operation == "*":
        return _build(left) * _build(right)
    return left * _build(right)


def _size(expression, sizes):
    if isinstance(expression, gv.Dim):
        return sizes[_ATOMS.index(expression)]
    operation, left, right = expression
    if operation == "+":
        return _size(left, sizes) + _size(right, sizes)
    if operation == "*":
        return _size(left, sizes) * _size(right, sizes)
    return left * _size(right, sizes)


@settings(max_examples=80, deadline=None)
@given(_expressions(), _expressions(), _expressions())
def test_distribution_memoization_and_division_on_random_expressions(x, y, z):
    a, b, c = _build(x), _build(y), _build(z)
    assert (a + b) * c is a * c + b * c
    assert a * c // c == a and (a + b) - b == a
    assert 2 * a is a + a
    assert _build(x) is a                       # memoized
    sizes = [None, 2, 3, None]
    if a.size is not None:
        assert a.size == _size(x, sizes)
    assert product([a, b]) is a * b


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(_ATOMS), min_size=2, max_size=4))
def test_products_of_distinct_orders_differ(atoms):
    forward, backward = product(atoms), product(list(reversed(atoms)))
    assert (forward == backward) == (atoms == list(reversed(atoms)))
