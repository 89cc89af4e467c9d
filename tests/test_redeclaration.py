"""Declaring an op's name again: the same declaration replaces it, a different one is an error naming both
places; attributes a custom op declares are checked when built and when loaded."""
import json
import zipfile

import numpy as np
import pytest

import graphview as gv
from graphview import registry


@pytest.fixture
def g():
    return gv.Graph("redeclaration")


# --- a second declaration of the same name (issue 14 item 5) -------------------------------------

SOURCE = '''
import numpy as np
import graphview as gv

def double_kernel(x, out):
    out[...] = x * {factor}

double = gv.defop("test_double", shape=lambda x: x, kernel=double_kernel, differentiable=False,
                  namespace="math", attrs={{}})
'''


def _run_cell(source, filename):
    scope = {}
    exec(compile(source, filename, "exec"), scope)
    return scope["double"]


@pytest.fixture
def clean_registry():
    yield
    for table in (registry._REGISTRY, registry._CALLABLES, registry.NAMESPACES["math"]):
        table.pop("test_double", None)


def test_declaring_the_same_op_again_replaces_it(clean_registry, g):
    first = _run_cell(SOURCE.format(factor=2), "<cell 1>")
    second = _run_cell("\n\n" + SOURCE.format(factor=2), "<cell 2>")   # the same cell, re-run lower down
    assert second is not first
    assert registry.op("test_double") is second and registry.get("test_double") is second.definition
    assert g.math.test_double.__wrapped__ is second
    y = g.math.test_double(g.placeholder("x", (2,)))
    np.testing.assert_array_equal(y.eval({"x": np.array([1.0, 2.0])}), [2.0, 4.0])


def test_declaring_another_op_under_a_taken_name_says_where_the_first_came_from(clean_registry):
    first = _run_cell(SOURCE.format(factor=2), "<cell 1>")
    with pytest.raises(gv.GraphviewError, match=r"an op named 'test_double' is already registered, declared at "
                                                r"<cell 1>:8, and this declaration at <cell 2>:8 differs in its "
                                                r"kernel; give the new op another name"):
        _run_cell(SOURCE.format(factor=3), "<cell 2>")
    with pytest.raises(gv.GraphviewError, match="differs in its namespaces"):
        _run_cell(SOURCE.format(factor=2).replace('namespace="math"', 'namespace="nn"'), "<cell 3>")
    assert registry.op("test_double") is first


def test_a_built_in_name_cannot_be_taken_by_a_different_op():
    with pytest.raises(gv.GraphviewError, match=r"an op named 'add' is already registered, declared at "
                                                r".*graphview/ops/math.py:\d+, and this declaration at "
                                                r".*test_redeclaration.py:\d+ differs"):
        gv.defop("add", shape=lambda x, y: x, kernel=lambda x, y, out: None)
    assert registry.get("add").family == "elementwise"
    # A user op named like an op graphview ships (softplus is built in since issue 16) is told so.
    with pytest.raises(gv.GraphviewError, match=r"give the new op another name \('softplus' is one of graphview's "
                                                r"built-in ops, g.nn.softplus\)"):
        gv.defop("softplus", shape=lambda x: x, kernel=lambda x, out: None)


FACTORY = '''
import numpy as np
import graphview as gv

def scaled(scale):
    def kernel(x, out):
        out[...] = x * scale
    return kernel

double = gv.defop("test_double", shape=lambda x: x, kernel=scaled(np.array({factor})), differentiable=False)
'''


def test_functions_made_by_a_factory_compare_by_what_they_capture(clean_registry):
    _run_cell(FACTORY.format(factor=2.0), "<cell 1>")
    second = _run_cell(FACTORY.format(factor=2.0), "<cell 2>")
    assert registry.op("test_double") is second
    # The message names the declaration in force: the one that replaced the first.
    with pytest.raises(gv.GraphviewError, match=r"declared at <cell 2>:10, .* differs in its kernel"):
        _run_cell(FACTORY.format(factor=3.0), "<cell 3>")


WRAPPED = '''
import graphview as gv

def declare():
    def double_kernel(x, out):
        out[...] = x * {factor}
    return gv.defop("test_double", shape=lambda x: x, kernel=double_kernel, differentiable=False)

double = declare()
'''


def test_both_declarations_are_named_by_the_line_calling_gv_defop(clean_registry):
    _run_cell(WRAPPED.format(factor=2), "<cell 1>")
    with pytest.raises(gv.GraphviewError, match=r"declared at <cell 1>:7, and this declaration at <cell 2>:7 "):
        _run_cell(WRAPPED.format(factor=3), "<cell 2>")
    with pytest.raises(gv.GraphviewError, match=r"declared at <cell 1>:7, and this declaration at <cell 3>:8 "):
        _run_cell(SOURCE.format(factor=3), "<cell 3>")


# --- a user's op declares its attributes the same way ------------------------------------------------

@pytest.fixture
def repeat_op():
    def repeat_shape(x, times):
        return (x[0] * times if x[0] is not None else None,) + tuple(x[1:])

    def repeat_kernel(x, out, times):
        out[...] = np.concatenate([x] * times)

    op = gv.defop("test_repeat", shape=repeat_shape, kernel=repeat_kernel, differentiable=False,
                  attrs={"times": gv.attrs.Int(minimum=1)})
    yield op
    registry._REGISTRY.pop("test_repeat", None)
    registry._CALLABLES.pop("test_repeat", None)


def test_a_custom_op_s_declared_attributes_are_checked_when_built_and_loaded(repeat_op, g, tmp_path):
    x = g.placeholder("x", (2,))
    y = repeat_op(x, times=np.int64(3), name="y")
    assert y.shape == (6,) and y.node.attributes["times"] == 3
    np.testing.assert_array_equal(y.eval({"x": np.array([1.0, 2.0])}), [1, 2, 1, 2, 1, 2])
    with pytest.raises(gv.OpArgumentError, match=r"test_repeat: attribute 'times': 0 is not in \[1, inf\]"):
        repeat_op(x, times=0)
    with pytest.raises(gv.OpArgumentError, match="test_repeat needs the attribute 'times'"):
        repeat_op(x)
    g.save(tmp_path / "good.gvz")
    with zipfile.ZipFile(tmp_path / "good.gvz") as archive:
        members = {member: archive.read(member) for member in archive.namelist()}
    document = json.loads(members["graph.json"])
    document["nodes"][1]["attrs"] = [["times", 0]]
    with zipfile.ZipFile(tmp_path / "bad.gvz", "w") as archive:
        for member, data in {**members, "graph.json": json.dumps(document)}.items():
            archive.writestr(member, data)
    with pytest.raises(gv.GraphFileError, match=r"node 1 \('y'\): op test_repeat attribute 'times': 0 is not in"):
        gv.load(tmp_path / "bad.gvz")


@pytest.mark.parametrize("attrs, message", [
    ({"count": gv.attrs.Int()}, "attrs declares 'count', which the shape rule does not take"),
    ({"times": int}, r"attrs\['times'\] is <class 'int'>, not a gv.attrs declaration"),
    ({"times": gv.attrs.Axis(input="y")}, "refers to input 'y', which the shape rule does not name"),
])
def test_defop_refuses_declarations_that_do_not_fit_the_shape_rule(attrs, message):
    with pytest.raises(gv.GraphviewError, match=message):
        gv.defop("test_bad_attrs", shape=lambda x, times=1: x, kernel=lambda x, out, times=1: None, attrs=attrs)
    assert "test_bad_attrs" not in registry.ops()


@pytest.mark.parametrize("rate, training, message", [
    (False, True, r"dropout: attribute 'rate': False is not a number"),
    (np.zeros(2), True, r"dropout: attribute 'rate'"),
    (0.0, "no", r"dropout: attribute 'training': 'no' is not a bool"),
    (1.0, True, r"dropout: attribute 'rate'"),
    (0.0, True, r"dropout: attribute 'seed': -1 is not a seed"),
    (0.5, False, r"dropout: attribute 'seed': -1 is not a seed"),
])
def test_dropout_checks_rate_seed_and_training_before_its_shortcut(rate, training, message):
    # rate == 0 or training=False builds no node; the values are still judged by the declarations.
    g = gv.Graph()
    x = g.placeholder("x", (2,))
    with pytest.raises(gv.OpArgumentError, match=message):
        g.nn.dropout(x, rate, training=training, seed=-1 if "seed" in message else None)


def test_dropout_training_none_is_the_default():
    g = gv.Graph()
    x = g.placeholder("x", (2,))
    assert g.nn.dropout(x, 0.5, training=None, name="d").op == "dropout"
    assert g.nn.dropout(x, 0.5, training=False) is x


def test_huge_ints_are_refused_with_a_short_message_where_str_itself_would_fail():
    g = gv.Graph()
    x = g.placeholder("x", (2, 3))
    with pytest.raises(gv.OpArgumentError, match=r"sum: attribute 'axis': an int of about 5001 digits is past"):
        g.math.sum(x, axis=10**5000)
    with pytest.raises(gv.ShapeError, match=r"reshape: .*an int of about 5001 digits, past the int64 range"):
        g.shape.reshape(x, (10**5000,))
    with pytest.raises(gv.data.DataError, match=r"an int of about 5001 digits"):
        gv.data.Batch(10**5000)
