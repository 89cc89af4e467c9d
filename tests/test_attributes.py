"""Op attributes are declared once (gv.attrs) and checked alike when an op is built and when a file is loaded."""
import json
import zipfile

import numpy as np
import pytest

import graphview as gv
from graphview import registry
from optable import all_samples, build


@pytest.fixture
def g():
    return gv.Graph("attributes")


# --- seeds (issue 13 item 4) ----------------------------------------------------------------------

BAD_SEEDS = [-1, 2**64, 2**70, 1.5, "x", True, None]


DRAWS = {
    "dropout": lambda g, seed: g.nn.dropout(g.placeholder("x", (3,)), 0.5, seed=seed),
    "dropout op": lambda g, seed: registry.op("dropout")(g.placeholder("x", (3,)), rate=0.5, seed=seed),
    "normal": lambda g, seed: g.random.normal((2,), seed=seed),
    "uniform": lambda g, seed: g.random.uniform((2,), seed=seed),
    "normal op": lambda g, seed: _in(g, lambda: registry.op("normal")(shape=(2,), dtype="float64", seed=seed,
                                                                      mean=0.0, std=1.0)),
}


def _in(g, call):
    token = registry.default_graph.set(g)
    try:
        return call()
    finally:
        registry.default_graph.reset(token)


@pytest.mark.parametrize("seed", BAD_SEEDS, ids=repr)
@pytest.mark.parametrize("draw", sorted(DRAWS))
def test_every_seeded_op_refuses_a_seed_outside_0_to_2_to_the_64_when_built(g, draw, seed):
    if seed is None and not draw.endswith(" op"):
        pytest.skip("seed=None asks the public function for a seed derived from the node's name")
    draw = DRAWS[draw]
    before = len(g.nodes())
    with pytest.raises(gv.OpArgumentError, match=r"attribute 'seed': .* is not a seed: a seed is an int in "
                                                 r"\[0, 2\*\*64\)"):
        draw(g, seed)
    assert len(g.nodes()) <= before + 1   # at most the placeholder: no op node


def test_seeds_of_any_integer_type_up_to_2_to_the_64_run(g):
    x = g.placeholder("x", (4,))
    top = g.nn.dropout(x, 0.5, seed=2**64 - 1)
    typed = g.nn.dropout(x, 0.5, seed=np.uint64(7))
    draw = g.random.uniform((3,), seed=np.int32(0))
    with gv.training_mode():              # dropout draws its mask only in training mode
        values = g.output({"x": np.ones(4)}, [top, typed, draw])
    assert typed.node.attributes["seed"] == 7 and type(typed.node.attributes["seed"]) is int
    assert values[draw.name].shape == (3,) and set(np.unique(values[top.name])) <= {0.0, 2.0}


@pytest.mark.parametrize("rate, message", [(1.0, r"1.0 is not in \[0.0, 1.0\)"), (-0.5, "not in"),
                                           (float("nan"), "nan is not in"), ("x", "'x' is not a number")])
def test_dropout_rate_is_checked_by_its_declaration(g, rate, message):
    with pytest.raises(gv.OpArgumentError, match=f"dropout: attribute 'rate': .*{message}"):
        g.nn.dropout(g.placeholder("x", (3,)), rate, seed=1)


@pytest.fixture
def scale_op():
    op = gv.defop("test_scale", shape=lambda x, factor: x, kernel=lambda x, out, factor: None,
                  differentiable=False, attrs={"factor": gv.attrs.Float()})
    yield op
    registry._REGISTRY.pop("test_scale", None)
    registry._CALLABLES.pop("test_scale", None)


def test_unbounded_floats_take_nan_and_infinities_but_not_what_overflows_a_float(g, scale_op):
    x = g.placeholder("x", (2,))
    assert np.isnan(scale_op(x, factor=np.nan).node.attributes["factor"])
    assert scale_op(x, factor=-np.inf).node.attributes["factor"] == -np.inf
    assert scale_op(x, factor=np.float32(2)).node.attributes["factor"] == 2.0
    with pytest.raises(gv.OpArgumentError, match="attribute 'factor': an int of 401 digits is too large for a float"):
        scale_op(x, factor=10**400)


def test_non_finite_attributes_of_an_unbounded_float_survive_a_file(g, scale_op, tmp_path):
    x = g.placeholder("x", (2,))
    for value in (np.inf, -np.inf, np.nan):
        scale_op(x, factor=value)
    g.save(tmp_path / "scaled.gvz")
    loaded = [dict(n.attrs)["factor"] for n in gv.load(tmp_path / "scaled.gvz").nodes() if n.op == "test_scale"]
    assert loaded[:2] == [np.inf, -np.inf] and np.isnan(loaded[2])


@pytest.mark.parametrize("call, message", [
    (lambda g: g.random.normal((2,), std=10**600, seed=1), "attribute 'std': an int of 601 digits is too large"),
    (lambda g: g.random.normal((2,), seed=10**600), "attribute 'seed': an int of 601 digits is not a seed"),
    (lambda g: g.random.normal((2,), seed=-10**600), "attribute 'seed': an int of 601 digits is not a seed"),
    (lambda g: g.nn.dropout(g.placeholder("x", (3,)), "x" * 1000, seed=1), r"attribute 'rate': 'x{36}\.\.\. is not"),
    (lambda g: g.math.sum(g.placeholder("x", (3,)), axis=10**600), "axis': an int of 601 digits is past the int64 range"),
])
def test_huge_values_are_abbreviated_in_messages(g, call, message):
    with pytest.raises(gv.GraphviewError, match=message) as caught:
        call(g)
    assert len(str(caught.value)) < 300


# --- no public function coerces an attribute before its declaration checks it (review item 6) --------

@pytest.mark.parametrize("call, message", [
    (lambda g, x, n: g.math.sum(x, axis=0, keepdims="no"), "sum: attribute 'keepdims': 'no' is not a bool"),
    (lambda g, x, n: g.math.mean(x, axis=0, keepdims=1), "mean: attribute 'keepdims': 1 is not a bool"),
    (lambda g, x, n: g.math.argmax(x, axis=0, keepdims=[]), r"argmax: attribute 'keepdims': \(\) is not a bool"),
    (lambda g, x, n: gv.masked_sum(x, n, axis=1, keepdims="yes"), "attribute 'keepdims': 'yes' is not a bool"),
    (lambda g, x, n: g.math.cast(x, None), "cast: attribute 'dtype': None is not one of the dtypes"),
    (lambda g, x, n: g.random.normal((2,), dtype=None), "normal: attribute 'dtype': None is not one of"),
    (lambda g, x, n: g.random.uniform((2,), dtype="int64"), "uniform: attribute 'dtype': 'int64' is not one of"),
])
def test_public_functions_leave_attributes_to_their_declarations(g, call, message):
    x, n = g.placeholder("x", (2, 3)), g.placeholder("n", (2,), "int64")
    before = len(g.nodes())
    with pytest.raises((gv.OpArgumentError, gv.DTypeError), match=message):
        call(g, x, n)
    assert len(g.nodes()) == before


def test_keepdims_and_dtypes_of_the_declared_kinds_are_still_accepted(g):
    x = g.placeholder("x", (2, 3))
    assert g.math.sum(x, axis=0, keepdims=np.bool_(True)).shape == (1, 3)
    assert g.math.sum(x, axis=0).shape == (3,)
    assert g.math.cast(x, float).dtype == np.float64 and g.math.cast(x, np.float32).dtype == np.float32
    assert g.math.cast(x, np.dtype("int32")).node.attributes["dtype"] == "int32"
    assert g.random.normal([2, np.int64(3)], dtype=np.float32, seed=1).shape == (2, 3)


def _rewrite(path, target, edit):
    """A copy of the graph file ``path`` at ``target`` whose graph.json ``edit`` changed."""
    with zipfile.ZipFile(path) as archive:
        members = {member: archive.read(member) for member in archive.namelist()}
    document = json.loads(members["graph.json"])
    edit(document)
    with zipfile.ZipFile(target, "w") as archive:
        for member, data in {**members, "graph.json": json.dumps(document)}.items():
            archive.writestr(member, data)
    return target


def _set_attribute(document, op, key, value):
    for node in document["nodes"]:
        if node.get("op") == op:
            node["attrs"] = [[k, value if k == key else v] for k, v in node["attrs"]]


def test_keepdims_one_is_refused_alike_when_built_and_when_loaded(g, tmp_path):
    x = g.placeholder("x", (2, 3))
    g.math.sum(x, axis=0, keepdims=True, name="total")
    g.save(tmp_path / "good.gvz")
    bad = _rewrite(tmp_path / "good.gvz", tmp_path / "bad.gvz", lambda d: _set_attribute(d, "sum", "keepdims", 1))
    with pytest.raises(gv.GraphFileError, match="op sum attribute 'keepdims': 1 is not a bool"):
        gv.load(bad)
    with pytest.raises(gv.OpArgumentError, match="sum: attribute 'keepdims': 1 is not a bool"):
        g.math.sum(x, axis=0, keepdims=1)


# --- random draws take finite parameters, a scale >= 0 and low <= high (review item 10) --------------

@pytest.mark.parametrize("call, message", [
    (lambda g: g.random.normal((2,), std=-1.0, seed=1), r"normal: attribute 'std': -1.0 is not in \[0.0, inf\)"),
    (lambda g: g.random.normal((2,), std=np.inf, seed=1), "attribute 'std': inf is not a finite number"),
    (lambda g: g.random.normal((2,), mean=np.nan, seed=1), "attribute 'mean': nan is not a finite number"),
    (lambda g: g.random.uniform((2,), low=-np.inf, seed=1), "attribute 'low': -inf is not a finite number"),
    (lambda g: g.random.uniform((2,), high=np.nan, seed=1), "attribute 'high': nan is not a finite number"),
    (lambda g: g.random.uniform((2,), low=2.0, high=1.0, seed=1),
     r"uniform: attribute 'low': 2.0 is greater than high \(1.0\)"),
])
def test_random_parameters_numpy_and_torch_refuse_are_refused(g, call, message):
    with pytest.raises(gv.OpArgumentError, match=message):
        call(g)
    assert not g.nodes()


def test_random_parameters_at_their_limits_are_accepted(g):
    zero = g.random.normal((3,), mean=1.5, std=0.0, seed=1)
    point = g.random.uniform((3,), low=2.0, high=2.0, seed=1)
    values = g.output({}, [zero, point])
    np.testing.assert_array_equal(values[zero.name], [1.5] * 3)
    np.testing.assert_array_equal(values[point.name], [2.0] * 3)


@pytest.mark.parametrize("op, key, value, message", [
    ("normal", "std", -1.0, r"-1.0 is not in \[0.0, inf\)"),
    ("uniform", "low", 5.0, r"5.0 is greater than high \(1.0\)"),
])
def test_random_parameters_are_checked_when_loaded(g, tmp_path, op, key, value, message):
    getattr(g.random, op)((2,), seed=1, name="draw")
    g.save(tmp_path / "good.gvz")
    bad = _rewrite(tmp_path / "good.gvz", tmp_path / "bad.gvz", lambda d: _set_attribute(d, op, key, value))
    with pytest.raises(gv.GraphFileError, match=f"op {op} attribute '{key}': {message}"):
        gv.load(bad)


def test_an_attribute_compared_with_an_undeclared_one_is_refused_at_defop():
    with pytest.raises(gv.GraphviewError, match="attrs\\['low'\\] is compared with 'high', which attrs does not declare"):
        gv.defop("test_bad_relation", shape=lambda low, high=1.0: (), kernel=lambda out, low, high=1.0: None,
                 attrs={"low": gv.attrs.Float(at_most="high")})
    assert "test_bad_relation" not in registry.ops()


# --- a dim-holding axis goes through the same parser (review item 12) --------------------------------

def test_an_axis_holding_a_dim_and_a_float_is_the_op_s_argument_error(g):
    time = gv.Dim("time")
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, gv.Dim("feature", 4)))
    with pytest.raises(gv.OpArgumentError, match=r"mean 'pooled': attribute 'axis': \(1, 0.5\) holds 0.5, "
                                                 "which is not an int"):
        g.math.mean(seq, axis=(time, 0.5), name="pooled")
    with pytest.raises(gv.ShapeError, match=r"mean: attribute 'axis': \(1, 1\) names an axis twice"):
        g.math.mean(seq, axis=(time, 1))
    assert g.math.mean(seq, axis=(time, np.int64(2))).rank == 1


# --- axes (issue 13 item 5) -------------------------------------------------------------------------

def _axis_ops(g, axis):
    """Every op taking an axis, called with ``axis`` on a (2, 3) input (and a (2, 3) second input)."""
    x = g.placeholder("x", (2, 3))
    y = g.placeholder("y", (2, 3))
    lengths = g.placeholder("lengths", (2,), "int64")
    return {
        "sum": lambda: g.math.sum(x, axis), "mean": lambda: g.math.mean(x, axis), "max": lambda: g.math.max(x, axis),
        "min": lambda: g.math.min(x, axis), "prod": lambda: g.math.prod(x, axis),
        "logsumexp": lambda: g.math.logsumexp(x, axis), "argmax": lambda: g.math.argmax(x, axis),
        "argmin": lambda: g.math.argmin(x, axis), "softmax": lambda: g.nn.softmax(x, axis),
        "log_softmax": lambda: g.nn.log_softmax(x, axis), "concat": lambda: g.shape.concat([x, y], axis),
        "stack": lambda: g.shape.stack([x, y], axis), "expand_dims": lambda: g.shape.expand_dims(x, axis),
        "squeeze": lambda: g.shape.squeeze(g.placeholder("one", (2, 1)), axis),
        "gather": lambda: g.shape.gather(x, np.array([0]), axis),
        "numel": lambda: registry.op("numel")(x, axis=axis),
        "masked_sum": lambda: gv.masked_sum(x, lengths, axis=axis, time_axis=1),
        "masked_sum time_axis": lambda: gv.masked_sum(x, lengths, axis=1, time_axis=axis),
        "masked_softmax batch_axis": lambda: gv.masked_softmax(x, lengths, batch_axis=axis, time_axis=1),
        "split_axis": lambda: registry.op("split_axis")(x, axis=axis, sizes=(-1,)),
    }


AXIS_OPS = sorted(_axis_ops(gv.Graph(), 0))


@pytest.mark.parametrize("op", AXIS_OPS)
def test_every_axis_takes_numpy_integers(g, op):
    axis = np.int64(0) if op not in ("squeeze", "masked_sum time_axis") else np.int32(1 if op == "squeeze" else 1)
    if op.startswith("masked_softmax"):
        axis = np.int64(0)
    result = _axis_ops(g, axis)[op]()
    assert isinstance(result, gv.Variable)
    assert not any(_holds_numpy(value) for _, value in result.node.attrs), result.node.attrs


def _holds_numpy(value):
    return isinstance(value, np.generic) or (isinstance(value, tuple) and any(map(_holds_numpy, value)))


@pytest.mark.parametrize("bad", [0.0, 1.5, "0", [0.5], True])
@pytest.mark.parametrize("op", AXIS_OPS)
def test_every_axis_refuses_what_is_not_an_integer(g, op, bad):
    if isinstance(bad, list) and op in ("sum", "mean", "max", "min", "prod", "logsumexp", "squeeze", "numel",
                                        "expand_dims", "masked_sum"):
        match = r"\(0.5,\) holds 0.5, which is not an int"
    else:
        match = "is not an int"
    with pytest.raises(gv.OpArgumentError, match=f"attribute '(axis|time_axis|batch_axis)': .*{match}"):
        _axis_ops(g, bad)[op]()


@pytest.mark.parametrize("op", [op for op in AXIS_OPS if op not in ("sum", "mean", "max", "min", "prod", "logsumexp",
                                                                     "argmax", "argmin", "squeeze", "numel",
                                                                     "masked_sum")])
def test_none_is_refused_where_an_axis_is_required(g, op):
    with pytest.raises(gv.OpArgumentError, match="None is not an int"):
        _axis_ops(g, None)[op]()


@pytest.mark.parametrize("op", AXIS_OPS)
def test_an_axis_out_of_range_is_a_shape_error_naming_op_input_and_rank(g, op):
    with pytest.raises(gv.ShapeError, match=r"attribute '\w+': axis 7 is out of range for input \d \('\w+'\) of "
                                            r"rank \d") as caught:
        _axis_ops(g, 7)[op]()
    assert str(caught.value).startswith(op.split()[0])


def test_expand_dims_with_a_numpy_integer_is_the_view_numpy_gives(g):
    x = g.placeholder("x", (3,))
    y = g.shape.expand_dims(x, np.int64(0))
    z = g.shape.expand_dims(x, (np.int64(0), np.int32(-1)))
    values = g.output({"x": np.arange(3.0)}, [y, z])
    assert values[y.name].shape == (1, 3) and values[z.name].shape == (1, 3, 1)
    with pytest.raises(gv.ShapeError, match=r"expand_dims: attribute 'axis': axis 2 is out of range for input 0 "
                                            r"\('x'\) of rank 1 \(the result's 2 axes: axes -2..1\)"):
        g.shape.expand_dims(x, 2)
    with pytest.raises(gv.ShapeError, match=r"names an axis twice"):
        g.math.sum(g.placeholder("m", (2, 3)), (1, -1))


def test_perm_entries_stay_shape_errors_and_must_be_a_permutation(g):
    m = g.placeholder("m", (2, 3))
    assert g.shape.permute(m, (np.int64(1), np.int64(0))).shape == (3, 2)
    with pytest.raises(gv.ShapeError, match=r"permute: attribute 'perm': \(0, 0\) is not a permutation of the 2 axes"):
        registry.op("permute")(m, perm=(0, 0))


# --- every built-in attribute is declared, and loading refuses what building refuses (item 10) ----

def test_every_built_in_op_declares_every_attribute_its_samples_use():
    missing = []
    for definition in registry.definitions():
        used = {key for sample in (definition.samples() if definition.samples else ()) for key in sample.attrs}
        missing += [f"{definition.name}.{key}" for key in sorted(used - set(definition.attributes))]
    assert not missing, f"attributes without a gv.attrs declaration: {', '.join(missing)}"


BAD_VALUES = ["x", None, 1.5, -1, 2**64, [1, "a"], [0.5], True]


def _sample_cases():
    seen, cases = set(), []
    for name, index, sample in all_samples():
        if sample.attrs and name not in seen:
            seen.add(name)
            cases.append((name, index, sample))
    return cases


@pytest.mark.parametrize("case", _sample_cases(), ids=lambda case: case[0])
def test_a_value_building_refuses_is_refused_when_loaded(case, tmp_path):
    name, _, sample = case
    graph, output, _ = build(name, sample)
    graph.save(tmp_path / "good.gvz")
    with zipfile.ZipFile(tmp_path / "good.gvz") as archive:
        members = {member: archive.read(member) for member in archive.namelist()}
    for key in sample.attrs:
        for bad in BAD_VALUES:
            try:
                build(name, gv.Sample(sample.inputs, {**sample.attrs, key: bad}))
            except gv.GraphviewError:
                pass
            else:
                continue
            document = json.loads(members["graph.json"])
            node = next(n for n in document["nodes"] if n["name"] == output.name)
            node["attrs"] = [[k, bad if k == key else v] for k, v in node["attrs"]]
            path = tmp_path / "bad.gvz"
            with zipfile.ZipFile(path, "w") as archive:
                for member, data in {**members, "graph.json": json.dumps(document)}.items():
                    archive.writestr(member, data)
            with pytest.raises(gv.GraphFileError, match=rf"node \d+ \({output.name!r}\)"):
                gv.load(path)
