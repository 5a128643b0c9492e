"""The public layer contract: a Keras user's TransformerBlock and
TokenAndPositionEmbedding (keras-io's text classification with a transformer),
written as pyggml layers with sublayers, ops and arithmetic, train on a
synthetic sequence task as well as a PyTorch twin started from the same
weights, save, and load in a fresh process that predicts the same."""

import os
import subprocess
import sys

import numpy as np
import pytest

import pyggml as pg
import transformer_defs as td

HERE = os.path.dirname(os.path.abspath(__file__))
MAXLEN, VOCAB, EMBED, HEADS, FF = 12, 4, 16, 2, 32
EPOCHS = 2


def task(n, seed):
    """Label 1 when token 1 occurs more often than token 2: attention has to count."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, VOCAB, (n, MAXLEN))
    y = ((x == 1).sum(1) > (x == 2).sum(1)).astype(np.int64)
    return x, y


def torch_twin(weights):
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Twin(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(VOCAB, EMBED)
            self.pos = nn.Embedding(MAXLEN, EMBED)
            hk = HEADS * EMBED
            self.q, self.k, self.v = nn.Linear(EMBED, hk), nn.Linear(EMBED, hk), nn.Linear(EMBED, hk)
            self.o = nn.Linear(hk, EMBED)
            self.ln1, self.ln2 = nn.LayerNorm(EMBED, eps=1e-6), nn.LayerNorm(EMBED, eps=1e-6)
            self.f1, self.f2 = nn.Linear(EMBED, FF), nn.Linear(FF, EMBED)
            self.d1, self.d2, self.d3 = nn.Dropout(0.1), nn.Dropout(0.1), nn.Dropout(0.1)
            self.h, self.out = nn.Linear(MAXLEN * EMBED, 20), nn.Linear(20, 2)

        def forward(self, x):
            b = x.shape[0]
            e = self.tok(x) + self.pos(torch.arange(MAXLEN))
            q = self.q(e).view(b, MAXLEN, HEADS, EMBED).transpose(1, 2)
            k = self.k(e).view(b, MAXLEN, HEADS, EMBED).transpose(1, 2)
            v = self.v(e).view(b, MAXLEN, HEADS, EMBED).transpose(1, 2)
            att = torch.softmax(q @ k.transpose(-1, -2) / EMBED ** 0.5, dim=-1) @ v
            att = self.o(att.transpose(1, 2).reshape(b, MAXLEN, HEADS * EMBED))
            out1 = self.ln1(e + self.d1(att))
            out2 = self.ln2(out1 + self.d2(self.f2(torch.relu(self.f1(out1)))))
            return self.out(torch.relu(self.h(self.d3(out2.reshape(b, -1)))))

    twin = Twin()
    names = {"tok.weight": "token_and_position_embedding.token_emb.weight",
             "pos.weight": "token_and_position_embedding.pos_emb.weight",
             "ln1.weight": "transformer_block.layernorm1.weight", "ln1.bias": "transformer_block.layernorm1.bias",
             "ln2.weight": "transformer_block.layernorm2.weight", "ln2.bias": "transformer_block.layernorm2.bias",
             "f1.weight": "transformer_block.ffn.dense.weight", "f1.bias": "transformer_block.ffn.dense.bias",
             "f2.weight": "transformer_block.ffn.dense_1.weight", "f2.bias": "transformer_block.ffn.dense_1.bias",
             "h.weight": "dense.weight", "h.bias": "dense.bias", "out.weight": "dense_1.weight",
             "out.bias": "dense_1.bias"}
    for p, mine in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "out_proj")):
        names[f"{p}.weight"] = f"transformer_block.att.{mine}.weight"
        names[f"{p}.bias"] = f"transformer_block.att.{mine}.bias"
    with torch.no_grad():
        for tn, t in twin.named_parameters():
            t.copy_(torch.from_numpy(weights[names[tn]]))
    return torch, twin


def train_twin(torch, twin, x, y, epochs, seed):
    torch.manual_seed(seed)
    opt = torch.optim.Adam(twin.parameters(), lr=1e-3, eps=1e-8)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        twin.train()
        order = rng.permutation(len(x))
        for s in range(0, len(x), 32):
            idx = torch.from_numpy(order[s:s + 32])
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(twin(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    twin.eval()


def test_a_users_transformer_block_trains_saves_and_loads(tmp_path):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    x, y = task(1536, 0)
    xv, yv = task(512, 1)
    pg.set_seed(3)
    model = td.build(MAXLEN, VOCAB, EMBED, HEADS, FF)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    weights = model.get_weights()
    assert "transformer_block.att.q_proj.weight" in weights and "transformer_block.ffn.dense_1.bias" in weights
    torch, twin = torch_twin(weights)
    model.fit(x, y, epochs=EPOCHS, batch_size=32, verbose=0)
    mine = model.evaluate(xv, yv, return_dict=True)["accuracy"]
    train_twin(torch, twin, x, y, EPOCHS, 0)
    with torch.no_grad():
        theirs = float((twin(torch.from_numpy(xv)).argmax(1).numpy() == yv).mean())
    assert theirs > 0.9, f"the PyTorch twin reached only {theirs:.3f}: the task is too hard for the test"
    print(f"validation accuracy: pyggml {mine:.3f}, PyTorch {theirs:.3f}")
    assert mine >= theirs - 0.02, f"pyggml {mine:.3f} against PyTorch {theirs:.3f}"

    path = tmp_path / "transformer.gguf"
    model.save(path)
    want = model.predict(xv)
    np.save(tmp_path / "x.npy", xv)
    code = (f"import sys; sys.path.insert(0, {HERE!r}); import numpy as np; import transformer_defs; "
            f"import pyggml as pg; m = pg.load_model({str(path)!r}); "
            f"np.save({str(tmp_path / 'p.npy')!r}, m.predict(np.load({str(tmp_path / 'x.npy')!r})))")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300, cwd=str(tmp_path))
    np.testing.assert_array_equal(np.load(tmp_path / "p.npy"), want)
    model.free()


def test_an_unregistered_layer_is_named_when_loading_fails(tmp_path):
    class Unregistered(pg.layers.Layer):
        def call(self, x):
            return x * 2.0

    inp = pg.Input(3)
    m = pg.Model(inp, pg.layers.Dense(2)(Unregistered()(inp))).compile(loss="mse")
    m.save(tmp_path / "u.gguf")
    with pytest.raises(pg.GGUFError, match="Unregistered.*register_serializable"):
        pg.load_model(tmp_path / "u.gguf")
    loaded = pg.load_model(tmp_path / "u.gguf", custom_objects={"Unregistered": Unregistered})
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(loaded.predict(x), m.predict(x))


def test_an_op_without_a_backward_pass_is_named():
    class RowMeans(pg.layers.Layer):
        """ggml's mean over each row (pyggml.core.ops.mean) has no backward pass (only a
        scalar mean has one); pyggml.ops.mean, Keras's, is built from ops that have."""

        def build(self, input_shape):
            self.w = self.add_weight("w", (input_shape[-1],), "ones")

        def call(self, x):
            return pg.core.ops.mean(x * self.w)

    m = pg.Sequential([RowMeans()], input_shape=3).compile(loss="mse")
    with pytest.raises(pg.GGMLError, match="backward pass for MEAN|mean"):
        m.fit(np.ones((4, 3)), np.zeros((4, 1)), verbose=0)
    np.testing.assert_allclose(m.predict(np.full((2, 3), 3.0)), 3.0)      # inference is fine
    m.free()


def test_sublayers_freeze_and_their_weights_are_named_by_attribute():
    class Block(pg.layers.Layer):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.inner = pg.layers.Dense(4)
            self.stack = [pg.layers.Dense(4), pg.layers.Dense(3)]

        def call(self, x):
            h = self.inner(x)
            for l in self.stack:
                h = l(h)
            return h

    b = Block()
    m = pg.Sequential([b], input_shape=5).compile(loss="mse", optimizer=pg.optimizers.SGD(0.1))
    assert list(m.get_weights()) == ["block.inner.weight", "block.inner.bias", "block.stack.0.weight",
                                     "block.stack.0.bias", "block.stack.1.weight", "block.stack.1.bias"]
    b.stack[0].trainable = False
    before = m.get_weights()
    m.fit(np.ones((8, 5)), np.zeros((8, 3)), epochs=1, batch_size=8, verbose=0)
    after = m.get_weights()
    np.testing.assert_array_equal(after["block.stack.0.weight"], before["block.stack.0.weight"])
    assert not np.array_equal(after["block.inner.weight"], before["block.inner.weight"])
    m.free()


class _DictSum(pg.layers.Layer):
    """keras-io's structured-data Classifier pattern: call() takes the dict of inputs as it
    is, build() gets a dict of shapes."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = pg.layers.Dense(1, kernel_initializer="ones")
        self.seen_shapes = None

    def build(self, input_shape):
        self.seen_shapes = input_shape

    def call(self, inputs):
        assert isinstance(inputs, dict)
        return self.dense(pg.layers.concatenate([inputs["b"], inputs["a"] * 2.0]))


def test_a_layer_gets_a_dict_of_inputs_as_keras_gives_it(tmp_path):
    a, b = pg.Input(shape=(2,), name="a"), pg.Input(shape=(1,), name="b")
    layer = _DictSum()
    out = layer({"a": a, "b": b})
    assert layer.seen_shapes == {"a": (None, 2), "b": (None, 1)}
    m = pg.Model({"a": a, "b": b}, out).compile(loss="mse")
    xa = np.array([[1.0, 2.0], [0.5, -1.0]], np.float32)
    xb = np.array([[3.0], [1.0]], np.float32)
    want = xb[:, 0] + 2 * xa.sum(1)
    np.testing.assert_allclose(m.predict({"a": xa, "b": xb})[:, 0], want, rtol=1e-6)
    # eagerly, on a dict of arrays
    np.testing.assert_allclose(layer({"b": xb, "a": xa})[:, 0], want, rtol=1e-6)
    # the dict's keys are kept when saved
    m.fit({"a": xa, "b": xb}, want[:, None], epochs=1, verbose=0)
    path = str(tmp_path / "dict.gguf")
    m.save(path)
    m2 = pg.saving.load_model(path, custom_objects={"_DictSum": _DictSum})
    np.testing.assert_allclose(m2.predict({"a": xa, "b": xb}), m.predict({"a": xa, "b": xb}), rtol=1e-6)
    m.free(), m2.free()


def test_a_model_called_on_a_dict_of_nodes_matches_them_by_name():
    a, b = pg.Input(shape=(2,), name="a"), pg.Input(shape=(2,), name="b")
    inner = pg.Model([a, b], pg.layers.Subtract()([a, b]))
    p, q = pg.Input(shape=(2,), name="p"), pg.Input(shape=(2,), name="q")
    outer = pg.Model([p, q], inner({"b": q, "a": p})).compile(loss="mse")
    xp, xq = np.ones((1, 2), np.float32), np.full((1, 2), 3.0, np.float32)
    np.testing.assert_allclose(outer.predict([xp, xq]), xp - xq)
    outer.free()


def test_a_dict_of_inputs_needs_string_keys():
    with pytest.raises(TypeError, match="string keys"):
        pg.layers.Dense(2)({1: pg.Input(shape=(2,))})
    with pytest.raises(TypeError, match="string keys"):
        pg.layers.Dense(2)({})
