"""Layout views, dims with lengths, masked pooling and rearrange, as a `graphview gradcheck` target.

    python examples/layouts.py
    graphview gradcheck examples/layouts.py:build

An image model asks its input view for the layouts it needs (a convolution-style
'bchw', a dense 'bf'); a sequence model pools over a dynamic time dim whose
padding is ignored; both losses send their gradients back into the base layouts.
"""
import numpy as np

import graphview as gv


def build(batch=4, seed=0):
    """Two small models over layout views; returns (graph, placeholders) with the loss set."""
    r = np.random.default_rng(seed)
    g = gv.Graph("layouts")

    # Images arrive as bhwc; the dense layer wants bf, a channel mix wants bchw.
    images = g.placeholder("images", shape=(None, 4, 4, 3))
    view = gv.ImageView("bhwc", images)
    dense = g.var("dense", r.normal(size=(48, 5)) * 0.1)
    mix = g.var("mix", r.normal(size=(3, 1, 1)))
    image_score = g.math.sum(g.nn.relu(view.get("bf") @ dense)) + g.math.sum(view.get("bchw") * mix)

    # Sequences: time is dynamic, so mean-pooling over it ignores each sequence's padding.
    time, feature = gv.Dim("time"), gv.Dim("feature", 6)
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, feature), lengths={time: "seq_len"})
    project = g.var("project", r.normal(size=(6, 2)))
    pooled = g.math.mean(g.math.tanh(seq @ project), axis=time)          # masked_mean
    attention = g.nn.softmax(g.math.sum(seq, axis=feature), axis=time)  # masked_softmax
    sequence_score = g.math.sum(pooled) + g.math.sum(attention * g.math.sum(seq, axis=feature))

    # A merge spelled as a pattern: b (h w) c, a zero-copy view of the images.
    pixels = gv.rearrange(images, "b h w c -> b (h w) c")
    pixel_score = g.math.sum(g.nn.sigmoid(pixels @ g.shape.reshape(mix, (3, 1))))
    g.set_loss(g.math.square(image_score + sequence_score + pixel_score) * 1e-3)

    lengths = r.integers(1, 8, batch)
    padded = r.normal(size=(batch, 7, 6))
    for b, n in enumerate(lengths):
        padded[b, n:] = 0.0
    placeholders = {"images": r.normal(size=(batch, 4, 4, 3)), "seq": padded, "seq_len": lengths}
    return g, placeholders


def main():
    g, placeholders = build()
    view = gv.ImageView("bhwc", g["images"])
    print(g.explain([view.get("bchw"), view.get("bf"), view.get("chwb", dtype="float32")]))
    gradients = g.calculate_gradients(placeholders, ["dense", "mix", "project"])
    print({name: grad.shape for name, grad in gradients.items()})
    print(gv.check_gradients(g, placeholders, wrt=["dense", "mix", "project"], max_per_param=20))


if __name__ == "__main__":
    main()
