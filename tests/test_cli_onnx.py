"""The graphview command on ONNX models: summary, gradcheck with --inputs and --loss, convert both ways."""
import json

import numpy as np
import pytest

import graphview as gv
from cli_helpers import run_main

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx_helpers import run_onnx  # noqa: E402


@pytest.fixture
def mlp(tmp_path):
    r = np.random.default_rng(0)
    g = gv.Graph("mlp")
    x = g.placeholder("x", (None, 4))
    hidden = g.math.tanh(x @ g.var("w1", r.normal(size=(4, 5))) + g.var("b1", np.zeros(5)))
    g.math.add(hidden @ g.var("w2", r.normal(size=(5, 3))), g.var("b2", np.zeros(3)), name="logits")
    g.save(tmp_path / "mlp.gvz")
    np.savez(tmp_path / "batch.npz", x=r.normal(size=(6, 4)))
    return g, tmp_path


def test_convert_to_onnx_then_back_keeps_the_outputs(mlp):
    g, folder = mlp
    status, out, _ = run_main("convert", str(folder / "mlp.gvz"), str(folder / "mlp.onnx"), "--outputs", "logits")
    assert status == 0 and "mlp.onnx" in out
    model = onnx.load(folder / "mlp.onnx")
    assert [o.name for o in model.graph.output] == ["logits"]
    batch = np.load(folder / "batch.npz")["x"]
    expected = g.output({"x": batch}, ["logits"])["logits"]
    np.testing.assert_allclose(run_onnx(model, {"x": batch})[0], expected, rtol=1e-12)
    status, _, _ = run_main("convert", str(folder / "mlp.onnx"), str(folder / "back.gvz"))
    back = gv.load(folder / "back.gvz")
    outputs = [node.name for node in back.nodes() if node.name == "logits" or node.name.startswith("logits")]
    assert status == 0 and outputs
    np.testing.assert_allclose(back.output({"x": batch}, [outputs[0]])[outputs[0]], expected, rtol=1e-12)


def test_summary_and_gradcheck_take_an_onnx_model(mlp):
    _, folder = mlp
    run_main("convert", str(folder / "mlp.gvz"), str(folder / "mlp.onnx"), "--outputs", "logits")
    status, out, _ = run_main("summary", str(folder / "mlp.onnx"))
    assert status == 0 and "w1" in out and "PLACEHOLDER" in out
    report = folder / "report.json"
    status, out, err = run_main("gradcheck", str(folder / "mlp.onnx"), "--inputs", str(folder / "batch.npz"), "--quiet",
                                "--json", str(report))
    assert status == 0, err
    document = json.loads(report.read_text())
    assert document["passed"] and {v["variable"] for v in document["variables"]} == {"w1", "b1", "w2", "b2"}
    status, _, err = run_main("gradcheck", str(folder / "mlp.onnx"), "--inputs", str(folder / "batch.npz"),
                              "--loss", "nothing")
    assert status == 2 and "has no output named 'nothing'" in err and "logits" in err
    assert err.startswith("graphview gradcheck: error: ") and "Error:" not in err   # one prefix for every error


def test_summary_params_of_an_onnx_model_lists_its_initializers(mlp):
    _, folder = mlp
    run_main("convert", str(folder / "mlp.gvz"), str(folder / "mlp.onnx"), "--outputs", "logits")
    status, out, _ = run_main("summary", str(folder / "mlp.onnx"), "--params")
    lines = out.splitlines()
    assert status == 0 and "0 layers" not in out
    assert lines[0].startswith("graph ") and "no layers" in lines[0] and "4 variables" in lines[0]
    assert "initializers" in lines[0]
    rows = {line.split()[0]: line.split()[-1] for line in lines[3:7]}
    assert rows == {"w1": "20", "b1": "5", "w2": "15", "b2": "3"}
    assert "total params: 43 (trainable 43, not trainable 0)" in out


def test_convert_refuses_what_it_cannot_write(mlp):
    _, folder = mlp
    status, _, err = run_main("convert", str(folder / "mlp.gvz"), str(folder / "mlp.onnx"))
    assert status == 2 and "needs --outputs" in err
    status, _, err = run_main("convert", str(folder / "mlp.gvz"), str(folder / "mlp.txt"), "--outputs", "logits")
    assert status == 2 and ".gvz graph file or a .onnx model" in err
    status, _, err = run_main("convert", str(folder / "mlp.gvz"), str(folder / "x.onnx"), "--outputs", "logitz")
    assert status == 2 and "no variable named 'logitz'" in err
    (folder / "bad.onnx").write_bytes(b"not a model")
    status, _, err = run_main("summary", str(folder / "bad.onnx"))
    assert status == 2 and "bad.onnx" in err
