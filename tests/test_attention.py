"""g.nn.scaled_dot_product_attention against PyTorch, with Dims and lengths; softmax over several axes."""
import numpy as np
import pytest

import graphview as gv

torch = pytest.importorskip("torch")
F = torch.nn.functional
R = np.random.default_rng(16)


def _attention(q, k, v, **options):
    g = gv.Graph()
    inputs = [g.placeholder(n, a.shape, a.dtype) for n, a in zip("qkv", (q, k, v))]
    mask = options.pop("mask", None)
    if mask is not None:
        mask = g.placeholder("mask", mask.shape, mask.dtype)
    out = g.nn.scaled_dot_product_attention(*inputs, mask=mask, **options)
    feeds = {"q": q, "k": k, "v": v}
    if mask is not None:
        feeds["mask"] = options_mask = _masks.pop()
        del options_mask
    return g.output(feeds, [out])[out.name], out


_masks = []


def _run(q, k, v, mask=None, **options):
    if mask is not None:
        _masks.append(mask)
        options["mask"] = mask
    return _attention(q, k, v, **options)[0]


def _torch(q, k, v, mask=None, causal=False, scale=None):
    return F.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)),
                                          attn_mask=None if mask is None else torch.from_numpy(mask),
                                          is_causal=causal, scale=scale).numpy()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lengths", [(3, 5), (5, 3)])
def test_matches_torch(dtype, causal, lengths):
    lq, lk = lengths
    q, k, v = (R.normal(size=s).astype(dtype) for s in ((2, 2, lq, 4), (2, 2, lk, 4), (2, 2, lk, 3)))
    tolerance = 1e-12 if dtype == np.float64 else 1e-5
    got = _run(q, k, v, causal=causal)
    assert got.dtype == dtype and got.shape == (2, 2, lq, 3)
    np.testing.assert_allclose(got, _torch(q, k, v, causal=causal), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_masks_and_scale_match_torch(dtype):
    q, k, v = (R.normal(size=s).astype(dtype) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 6)))
    tolerance = 1e-12 if dtype == np.float64 else 1e-5
    boolean = R.random((3, 5)) < 0.7
    boolean[:, 0] = True   # every row attends somewhere
    np.testing.assert_allclose(_run(q, k, v, mask=boolean), _torch(q, k, v, boolean), rtol=tolerance, atol=tolerance)
    additive = R.normal(size=(2, 1, 5)).astype(dtype)
    np.testing.assert_allclose(_run(q, k, v, mask=additive, scale=0.3), _torch(q, k, v, additive, scale=0.3),
                               rtol=tolerance, atol=tolerance)


def test_a_row_with_nothing_to_attend_is_zero_as_in_torch():
    q, k, v = R.normal(size=(1, 2, 3)), R.normal(size=(1, 4, 3)), R.normal(size=(1, 4, 2))
    mask = np.array([[True, False, False, False], [False] * 4])
    got, expected = _run(q, k, v, mask=mask), _torch(q, k, v, mask)
    np.testing.assert_array_equal(expected[0, 1], 0.0)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    g = gv.Graph()
    qv, kv, vv = (g.var(n, a) for n, a in zip("qkv", (q, k, v)))
    g.set_loss(g.math.sum(g.nn.scaled_dot_product_attention(qv, kv, vv, mask=g.constant("c", mask))))
    gradients = g.calculate_gradients({}, ["q", "k", "v"])
    assert all(np.isfinite(value).all() for value in gradients.values()) and not gradients["q"][0, 1].any()


def _sequences():
    g = gv.Graph()
    query, key, feature, out = gv.Dim("query"), gv.Dim("key"), gv.Dim("feature", 4), gv.Dim("value", 3)
    q = g.placeholder("q", dims=(gv.batch_dim, query, feature), lengths={query: "query_len"})
    k = g.placeholder("k", dims=(gv.batch_dim, key, feature), lengths={key: "key_len"})
    v = g.placeholder("v", dims=(gv.batch_dim, key, out))
    return g, q, k, v, (query, key, feature, out)


def _padded_feeds():
    q, k, v = R.normal(size=(3, 4, 4)), R.normal(size=(3, 6, 4)), R.normal(size=(3, 6, 3))
    query_len, key_len = np.array([4, 2, 3]), np.array([6, 3, 1])
    kp, vp = k.copy(), v.copy()
    for b, n in enumerate(key_len):
        kp[b, n:] = np.nan
        vp[b, n:] = np.nan
    feeds = {"q": q, "k": kp, "v": vp, "query_len": query_len, "key_len": key_len}
    return feeds, (q, k, v), key_len


@pytest.mark.parametrize("causal", [False, True])
def test_key_lengths_mask_through_the_masked_softmax(causal):
    g, q, k, v, (query, key, feature, value) = _sequences()
    out = g.nn.scaled_dot_product_attention(q, k, v, causal=causal)
    assert gv.dims_of(out) == (gv.batch_dim, query, value)
    assert "masked_softmax" in [node.op for node in g.nodes()]
    feeds, (qa, ka, va), key_len = _padded_feeds()
    got = g.output(feeds, [out])[out.name]
    key_mask = np.arange(6)[None, None, :] < key_len[:, None, None]
    if causal:
        key_mask = key_mask & np.tril(np.ones((4, 6), bool))
    expected = _torch(qa, ka, va, key_mask)
    rows = np.broadcast_to(key_mask, (3, 4, 6)).any(axis=-1)
    rows &= np.arange(4)[None, :] < feeds["query_len"][:, None]   # a padded query is read as 0
    np.testing.assert_allclose(got[rows], expected[rows], rtol=1e-12, atol=1e-12)   # NaN padding is not read


def test_padded_keys_get_zero_weight_and_zero_gradient():
    g, q, k, v, dims = _sequences()
    out = g.nn.scaled_dot_product_attention(q, k, v)
    g.set_loss(g.math.sum(g.math.square(out)))
    feeds, _, key_len = _padded_feeds()
    for name in ("k", "v"):
        feeds[name] = np.nan_to_num(feeds[name], nan=7.0)   # finite padding: q's products with it stay finite
    grads = g.calculate_gradients(feeds, ["k", "v", "q"])
    for b, n in enumerate(key_len):
        assert not grads["k"][b, n:].any() and not grads["v"][b, n:].any()
    assert grads["k"][0].any()   # (with one valid key, its weight is 1 whatever k holds)


def test_gradients_match_finite_differences():
    g = gv.Graph()
    q, k, v = (g.var(n, R.normal(size=s)) for n, s in (("q", (2, 3, 4)), ("k", (2, 5, 4)), ("v", (2, 5, 3))))
    mask = g.constant("mask", R.normal(size=(3, 5)))
    out = g.nn.scaled_dot_product_attention(q, k, v, mask=mask, causal=True)
    g.set_loss(g.math.sum(out * g.constant("weights", R.normal(size=(2, 3, 3)))))
    assert gv.check_gradients(g, {}).passed


def test_gradients_with_lengths_match_finite_differences():
    g, q, k, v, dims = _sequences()
    out = g.nn.scaled_dot_product_attention(q, k, v)
    g.set_loss(g.math.sum(out * g.constant("c", R.normal(size=(3, 4, 3)))))
    feeds, _, _ = _padded_feeds()
    for name in ("k", "v"):
        feeds[name] = np.nan_to_num(feeds[name], nan=0.5)
    report = gv.check_gradients(g, feeds, wrt=["q", "k", "v"])
    assert report.passed


def test_bad_inputs_are_refused_when_built():
    g = gv.Graph()
    q, k, v = g.placeholder("q", (2, 3, 4)), g.placeholder("k", (2, 5, 3)), g.placeholder("v", (2, 4, 3))
    with pytest.raises(gv.ShapeError, match="q 'q' has 4 features but k 'k' has 3"):
        g.nn.scaled_dot_product_attention(q, k, v)
    k2 = g.placeholder("k2", (2, 5, 4))
    with pytest.raises(gv.ShapeError, match="k 'k2' has 5 keys but v 'v' has 4"):
        g.nn.scaled_dot_product_attention(q, k2, v)
    with pytest.raises(gv.DTypeError, match="mask 'm' is int64"):
        g.nn.scaled_dot_product_attention(q, k2, g.placeholder("v2", (2, 5, 3)), mask=g.placeholder("m", (3, 5), "int64"))
    with pytest.raises(gv.ShapeError, match="unknown number of features"):
        g.nn.scaled_dot_product_attention(*(g.placeholder(n, (2, 3, None)) for n in ("a", "b", "c")))


def test_a_graph_with_attention_saves_and_loads(tmp_path):
    g, q, k, v, dims = _sequences()
    out = g.nn.scaled_dot_product_attention(q, k, v, causal=True)
    g.save(tmp_path / "attention.gvz")
    loaded = gv.load(tmp_path / "attention.gvz")
    feeds, _, _ = _padded_feeds()
    np.testing.assert_array_equal(loaded.output(feeds, [out.name])[out.name], g.output(feeds, [out])[out.name])


# --- softmax over several axes ------------------------------------------------------------------

def _reference(x, axes, log=False):
    shifted = x - x.max(axis=axes, keepdims=True)
    total = np.exp(shifted).sum(axis=axes, keepdims=True)
    return shifted - np.log(total) if log else np.exp(shifted) / total


@pytest.mark.parametrize("axes", [(1, 2), (0, 2), (2, 0), (-1, 1)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_over_several_axes_matches_numpy_and_torch(axes, log):
    x = R.normal(size=(3, 4, 5))
    g = gv.Graph()
    xv = g.placeholder("x", x.shape)
    out = (g.nn.log_softmax if log else g.nn.softmax)(xv, axis=axes)
    got = g.output({"x": x}, [out])[out.name]
    np.testing.assert_allclose(got, _reference(x, tuple(axes), log), rtol=1e-12, atol=1e-14)
    normalized = sorted(a % 3 for a in axes)
    kept = [a for a in range(3) if a not in normalized]
    flat = torch.from_numpy(np.transpose(x, kept + normalized).reshape(x.shape[kept[0]], -1))
    expected = (torch.log_softmax if log else torch.softmax)(flat, dim=1).numpy()
    np.testing.assert_allclose(np.transpose(got, kept + normalized).reshape(flat.shape), expected, rtol=1e-12,
                               atol=1e-14)


def _two_lengths_graph():
    g = gv.Graph()
    query, key, head = gv.Dim("query"), gv.Dim("key"), gv.Dim("head", 2)
    x = g.placeholder("x", dims=(gv.batch_dim, query, head, key), lengths={query: "query_len", key: "key_len"})
    r = np.random.default_rng(5)
    data, query_len, key_len = r.normal(size=(3, 4, 2, 5)), np.array([4, 2, 1]), np.array([5, 3, 0])
    padded = data.copy()
    for b in range(3):
        padded[b, query_len[b]:] = np.nan
        padded[b, :, :, key_len[b]:] = np.nan
    return g, x, (query, key, head), data, {"x": padded, "query_len": query_len, "key_len": key_len}


@pytest.mark.parametrize("log", [False, True])
def test_softmax_over_two_dims_with_lengths_is_masked_by_both(log):
    g, x, (query, key, head), data, feeds = _two_lengths_graph()
    out = (g.nn.log_softmax if log else g.nn.softmax)(x, axis=(query, key))
    assert gv.dims_of(out) == gv.dims_of(x)
    got = g.output(feeds, [out])[out.name]
    for b in range(3):
        n, m = feeds["query_len"][b], feeds["key_len"][b]
        if n and m:
            np.testing.assert_allclose(got[b, :n, :, :m], _reference(data[b, :n, :, :m], (0, 2), log), rtol=1e-12)
        padding = np.ones(got.shape[1:], bool)
        padding[:n, :, :m] = False
        assert not got[b][padding].any()       # 0 at the padding of either dim


def test_softmax_over_a_dim_with_lengths_and_a_static_one():
    g, x, (query, key, head), data, feeds = _two_lengths_graph()
    out = g.nn.softmax(x, axis=(head, key))
    got = g.output(feeds, [out])[out.name]
    for b in range(3):
        n, m = feeds["query_len"][b], feeds["key_len"][b]
        if m:
            np.testing.assert_allclose(got[b, :n, :, :m], _reference(data[b, :n, :, :m], (1, 2)), rtol=1e-12)
        assert not got[b, :n, :, m:].any()


def test_softmax_over_two_dims_with_lengths_has_a_gradient():
    g, x, (query, key, head), data, feeds = _two_lengths_graph()
    weights = g.constant("c", np.random.default_rng(6).normal(size=(3, 4, 2, 5)))
    g.set_loss(g.math.sum(g.nn.softmax(x, axis=(query, key)) * weights))
    feeds["x"] = np.nan_to_num(feeds["x"], nan=0.25)
    assert gv.check_gradients(g, feeds, wrt=["x"]).passed
    gradient = g.calculate_gradients(feeds, ["x"])["x"]
    for b in range(3):
        n, m = feeds["query_len"][b], feeds["key_len"][b]
        assert not gradient[b, n:].any() and not gradient[b, :, :, m:].any()


def test_softmax_over_several_axes_errors():
    g, x, (query, key, head), data, feeds = _two_lengths_graph()
    with pytest.raises(gv.ShapeError, match="names an axis twice"):
        g.nn.softmax(x, axis=(1, query))
    with pytest.raises(gv.DimError, match="batch axis outside the softmax axes"):
        g.nn.softmax(x, axis=(gv.batch_dim, key))
    with gv.unmasked():
        assert g.nn.softmax(x, axis=(query, key)).op == "softmax"


def test_the_softmax_op_itself_is_masked_over_several_axes():
    g, x, (query, key, head), data, feeds = _two_lengths_graph()
    direct = gv.registry.op("softmax")(x, axis=(1, 3))      # the masking layer's spec, not g.nn.softmax
    assert direct.op != "softmax" and gv.dims_of(direct) == gv.dims_of(x)
    through = g.nn.softmax(x, axis=(query, key))
    values = g.output(feeds, [direct, through])
    np.testing.assert_array_equal(values[direct.name], values[through.name])


# --- multi-head attention ---------------------------------------------------------------------

def _torch_heads(dtype, model_dim=8, heads=2):
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(model_dim, heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        module.in_proj_bias.copy_(torch.from_numpy(R.normal(size=3 * model_dim)))
        module.out_proj.bias.copy_(torch.from_numpy(R.normal(size=model_dim)))
    w_q, w_k, w_v = module.in_proj_weight.detach().numpy().reshape(3, model_dim, model_dim)
    b_q, b_k, b_v = module.in_proj_bias.detach().numpy().reshape(3, model_dim)
    weights = [w_q, w_k, w_v, module.out_proj.weight.detach().numpy(), b_q, b_k, b_v,
               module.out_proj.bias.detach().numpy()]
    return module, [w.astype(dtype) for w in weights]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_attention_matches_torch_with_key_lengths(dtype, causal):
    module, weights = _torch_heads(dtype)
    g = gv.Graph()
    query, key, model = gv.Dim("query"), gv.Dim("key"), gv.Dim("model", 8)
    q = g.placeholder("q", dims=(gv.batch_dim, query, model), dtype=dtype)
    k = g.placeholder("k", dims=(gv.batch_dim, key, model), lengths={key: "key_len"}, dtype=dtype)
    names = ["w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"]
    out = g.nn.multi_head_attention(q, k, k, 2, *(g.var(n, w) for n, w in zip(names, weights)), causal=causal)
    assert gv.dims_of(out)[:2] == (gv.batch_dim, query) and "masked_softmax" in [n.op for n in g.nodes()]
    qa, ka = R.normal(size=(3, 4, 8)).astype(dtype), R.normal(size=(3, 6, 8)).astype(dtype)
    key_len = np.array([6, 3, 1])
    padded = ka.copy()
    for b, n in enumerate(key_len):
        padded[b, n:] = np.nan
    got = g.output({"q": qa, "k": padded, "key_len": key_len}, [out])[out.name]
    padding = torch.from_numpy(np.arange(6)[None, :] >= key_len[:, None])
    blocked = torch.from_numpy(~np.tril(np.ones((4, 6), bool))) if causal else None
    expected, _ = module(*(torch.from_numpy(a.astype(np.float64)) for a in (qa, ka, ka)), key_padding_mask=padding,
                         attn_mask=blocked)
    tolerance = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(got, expected.detach().numpy(), rtol=tolerance, atol=tolerance)


def test_multi_head_attention_gradients_match_finite_differences():
    _, weights = _torch_heads(np.float64, model_dim=4, heads=2)
    g = gv.Graph()
    q, k = g.var("q", R.normal(size=(2, 3, 4))), g.var("k", R.normal(size=(2, 5, 4)))
    names = ["w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"]
    out = g.nn.multi_head_attention(q, k, k, 2, *(g.var(n, w) for n, w in zip(names, weights)),
                                    mask=g.constant("mask", R.random((3, 5)) < 0.8))
    g.set_loss(g.math.sum(out * g.constant("weights", R.normal(size=(2, 3, 4)))))
    assert gv.check_gradients(g, {}).passed


def test_multi_head_attention_refuses_heads_that_do_not_divide():
    g = gv.Graph()
    x = g.placeholder("x", (2, 3, 6))
    w = g.var("w", np.zeros((6, 6)))
    with pytest.raises(gv.ShapeError, match="query projects to 6 features, which 4 heads do not divide"):
        g.nn.multi_head_attention(x, x, x, 4, w, w, w, w)
    with pytest.raises(gv.OpArgumentError, match="multi_head_attention: num_heads must be an int >= 1, not 0"):
        g.nn.multi_head_attention(x, x, x, 0, w, w, w, w)


def test_second_derivatives_match_finite_differences():
    g = gv.Graph()
    q, k, v = (g.var(n, R.normal(size=s)) for n, s in (("q", (1, 3, 2)), ("k", (1, 4, 2)), ("v", (1, 4, 2))))
    g.set_loss(g.math.sum(g.nn.scaled_dot_product_attention(q, k, v, causal=True) ** 2))
    first = g.gradient_graph(["q", "k", "v"])
    first.graph.set_loss(first.graph.math.sum(first.graph.math.sin(first.gradients["q"])))
    report = gv.check_gradients(first.graph, {}, wrt=["q", "k", "v"])
    assert report.passed, str(report)


def test_softmax_over_several_axes_has_second_derivatives():
    g = gv.Graph()
    x = g.var("x", R.normal(size=(2, 3, 4)))
    g.set_loss(g.math.sum(g.nn.softmax(x, axis=(0, 2)) * g.constant("weights", R.normal(size=(2, 3, 4)))))
    first = g.gradient_graph(["x"])
    first.graph.set_loss(first.graph.math.sum(first.graph.math.sin(first.gradients["x"])))
    assert gv.check_gradients(first.graph, {}, wrt=["x"]).passed


# --- review fixes ---------------------------------------------------------------------------------

def _keys_with_lengths(g, dtype=np.float64):
    key, model = gv.Dim("key"), gv.Dim("model", 4)
    return g.placeholder("k", dims=(gv.batch_dim, key, model), lengths={key: "key_len"}, dtype=dtype)


def _cross_feeds():
    qa, ka, key_len = R.normal(size=(3, 2, 4)), R.normal(size=(3, 5, 4)), np.array([5, 2, 1])
    padded = ka.copy()
    for b, n in enumerate(key_len):
        padded[b, n:] = np.nan
    key_mask = np.arange(5)[None, None, :] < key_len[:, None, None]
    return {"q": qa, "k": padded, "key_len": key_len}, qa, ka, key_mask


def test_keys_with_lengths_mask_a_query_without_dims():
    g = gv.Graph()
    q, k = g.placeholder("q", (None, 2, 4)), _keys_with_lengths(g)
    out = g.nn.scaled_dot_product_attention(q, k, k)
    assert gv.dims_of(out)[0] == gv.batch_dim and "masked_softmax" in [n.op for n in g.nodes()]
    feeds, qa, ka, key_mask = _cross_feeds()
    np.testing.assert_allclose(g.output(feeds, [out])[out.name], _torch(qa, ka, ka, key_mask), rtol=1e-12, atol=1e-12)


def test_multi_head_attention_masks_keys_for_a_query_without_dims():
    module, weights = _torch_heads(np.float64, model_dim=4, heads=2)
    g = gv.Graph()
    q, k = g.placeholder("q", (None, 2, 4)), _keys_with_lengths(g)
    names = ["w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"]
    out = g.nn.multi_head_attention(q, k, k, 2, *(g.var(n, w) for n, w in zip(names, weights)))
    feeds, qa, ka, key_mask = _cross_feeds()
    expected, _ = module(*map(torch.from_numpy, (qa, ka, ka)), key_padding_mask=torch.from_numpy(~key_mask[:, 0]))
    np.testing.assert_allclose(g.output(feeds, [out])[out.name], expected.detach().numpy(), rtol=1e-12, atol=1e-12)


def test_a_numpy_mask_serves_several_layers():
    g = gv.Graph()
    x = g.placeholder("x", (2, 3, 4))
    mask = np.tril(np.ones((3, 3), bool))
    first = g.nn.scaled_dot_product_attention(x, x, x, mask=mask)
    second = g.nn.scaled_dot_product_attention(first, first, first, mask=mask)
    xa = R.normal(size=(2, 3, 4))
    expected = _torch(*(_torch(xa, xa, xa, mask),) * 3, mask)
    np.testing.assert_allclose(g.output({"x": xa}, [second])[second.name], expected, rtol=1e-12, atol=1e-12)


def test_nan_padding_of_q_and_k_leaves_values_and_gradients_finite():
    g, q, k, v, dims = _sequences()
    out = g.nn.scaled_dot_product_attention(q, k, v)
    g.set_loss(g.math.sum(g.math.square(out)))
    feeds, _, key_len = _padded_feeds()
    for b, n in enumerate(feeds["query_len"]):
        feeds["q"][b, n:] = np.nan
    assert np.isfinite(g.output(feeds, [out])[out.name]).all()
    grads = g.calculate_gradients(feeds, ["q", "k", "v"])
    assert all(np.isfinite(value).all() for value in grads.values())
    for b, n in enumerate(feeds["query_len"]):
        assert not grads["q"][b, n:].any()
    for b, n in enumerate(key_len):
        assert not grads["k"][b, n:].any() and not grads["v"][b, n:].any()


def test_docstrings_say_what_the_code_does():
    sdpa = " ".join(gv.Graph().nn.scaled_dot_product_attention.__doc__.split())
    assert "a row with no True gives 0" in sdpa and "NaN, as PyTorch" not in sdpa
    heads = " ".join(gv.Graph().nn.multi_head_attention.__doc__.split())
    assert "OPPOSITE of ``nn.MultiheadAttention``'s ``attn_mask`` and ``key_padding_mask``" in heads
