import importlib.util
import os
import pathlib

import numpy as np
import pytest
from hypothesis import settings

import graphview as gv
from graphview import registry

settings.register_profile("ci", max_examples=60, deadline=None)
settings.register_profile("dev", max_examples=30, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def forgetful_add():
    """An add whose gradient rule forgets to un-broadcast: it hands the output's gradient to both inputs."""
    from graphview.shapes import broadcast_shapes
    name = "test_forgetful_add"
    op = gv.defop(name, shape=broadcast_shapes, kernel=lambda x, b, out: np.add(x, b, out=out),
                  vjp=lambda grad, out, x, b: (grad, grad))
    yield op
    registry._REGISTRY.pop(name, None)
    registry._CALLABLES.pop(name, None)


@pytest.fixture
def run_in_threads():
    """``run(work, count=4)``: call ``work(seed)`` for seeds 0..count-1 on as many threads at once, and wait."""
    import threading

    def run(work, count=4):
        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return run


@pytest.fixture(scope="session")
def counts():
    """benchmarks/architecture_counts.py as a module (the architecture and layering tests' analysis)."""
    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "architecture_counts.py"
    spec = importlib.util.spec_from_file_location("architecture_counts", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
