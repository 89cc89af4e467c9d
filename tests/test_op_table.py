"""Every registered op, on every sample it declares, against its NumPy reference."""
import numpy as np
import pytest

from graphview import registry
from optable import all_samples, build, case_id, tolerance

CASES = all_samples()
# Taken when the module is collected, so ops that other tests register for a while do not count.
DEFINITIONS = registry.definitions()


def test_every_op_declares_samples_and_a_reference():
    missing = [d.name for d in DEFINITIONS if not d.samples or not list(d.samples())]
    assert not missing, f"ops without samples: {missing}"
    unreferenced = [d.name for d in DEFINITIONS if d.reference is None]
    assert not unreferenced, f"ops without a NumPy reference: {unreferenced}"


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_op_matches_reference(case):
    name, _, sample = case
    definition = registry.get(name)
    graph, output, feeds = build(name, sample)
    before = {key: value.copy() for key, value in feeds.items()}
    result = graph.output(feeds, [output])[output.name]
    expected = np.asarray(definition.reference(*sample.inputs, **sample.attrs))
    assert result.shape == expected.shape
    assert result.dtype == output.dtype
    assert result.dtype == expected.dtype, f"{name}: dtype {result.dtype} but NumPy gives {expected.dtype}"
    if result.dtype.kind == "f":
        np.testing.assert_allclose(result, expected, **tolerance(result.dtype))
    else:
        np.testing.assert_array_equal(result, expected)
    for key, value in feeds.items():
        np.testing.assert_array_equal(value, before[key], err_msg=f"{name} modified its input {key}")


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_build_time_shape_matches_run_time(case):
    name, _, sample = case
    graph, output, feeds = build(name, sample)
    result = graph.output(feeds, [output])[output.name]
    assert len(output.shape) == result.ndim
    assert all(d is None or d == r for d, r in zip(output.shape, result.shape))
