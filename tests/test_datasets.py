"""pg.data.Dataset (tf.data's calls on numpy), the *_dataset_from_directory
utilities, split_dataset and the image file helpers: each against values worked
out by hand, through fit as Keras scripts use them, and with bad arguments."""

import os

import numpy as np
import pytest

import pyggml as pg

D = pg.data.Dataset


def items(ds):
    return [tuple(np.asarray(a).tolist() for a in e) if isinstance(e, tuple) else np.asarray(e).tolist()
            for e in ds.as_numpy_iterator()]


# --- the pipeline ------------------------------------------------------------------------------------

def test_slices_keep_structure_and_lists_are_arrays():
    x, y = np.arange(12.0).reshape(6, 2), np.arange(6) % 3
    ds = D.from_tensor_slices((x, y))
    assert len(ds) == 6 and ds.cardinality() == 6
    a, b = ds[4]
    assert a.tolist() == [8.0, 9.0] and int(b) == 1 and b.numpy() == 1
    d = D.from_tensor_slices({"a": x, "b": y})
    assert d[-1]["a"].tolist() == [10.0, 11.0] and int(d[-1]["b"]) == 2
    assert items(D.from_tensor_slices([[1, 2], [3, 4]])) == [[1, 2], [3, 4]]      # a list: one array
    assert items(D.from_tensors([1, 2, 3])) == [[1, 2, 3]]
    with pytest.raises(ValueError, match="differ in length"):
        D.from_tensor_slices((np.zeros(3), np.zeros(4)))
    with pytest.raises(ValueError, match="first axis"):
        D.from_tensor_slices(np.float32(1.0))


def test_map_batch_take_skip_repeat():
    ds = D.range(10).map(lambda v: v * 10)
    assert items(ds.batch(4)) == [[0, 10, 20, 30], [40, 50, 60, 70], [80, 90]]
    assert items(ds.batch(4, drop_remainder=True)) == [[0, 10, 20, 30], [40, 50, 60, 70]]
    assert items(ds.take(3)) == [0, 10, 20] and items(ds.skip(8)) == [80, 90]
    assert len(ds.take(-1)) == 10 and len(ds.skip(-1)) == 0 and len(ds.take(50)) == 10
    assert items(D.range(3).repeat(2)) == [0, 1, 2, 0, 1, 2]
    forever = D.range(3).repeat()
    assert forever.cardinality() == pg.data.INFINITE_CARDINALITY
    with pytest.raises(TypeError, match="steps_per_epoch"):
        len(forever)
    assert items(forever.take(7)) == [0, 1, 2, 0, 1, 2, 0]
    assert items(forever.skip(2).take(2)) == [2, 0]
    pairs = D.from_tensor_slices((np.arange(4), np.arange(4) * 2)).map(lambda a, b: (a + b, b))  # tuple: unpacked
    assert items(pairs) == [(0, 0), (3, 2), (6, 4), (9, 6)]
    assert ds.prefetch(pg.data.AUTOTUNE) is ds and ds.with_options(None) is ds


def test_shuffle_is_a_permutation_reshuffled_each_pass_unless_told():
    ds = D.range(50).shuffle(10, seed=3)
    first, second = items(ds), items(ds)
    assert sorted(first) == list(range(50)) and sorted(second) == list(range(50))
    assert first != list(range(50)) and first != second
    assert items(D.range(50).shuffle(10, seed=3)) == first                      # the seed fixes the order
    fixed = D.range(50).shuffle(10, seed=3, reshuffle_each_iteration=False)
    assert items(fixed) == items(fixed)
    cached = D.range(50).shuffle(50, seed=1).cache()
    assert items(cached) == items(cached)                                        # cache keeps the first order


def test_filter_unbatch_padded_batch_zip_concatenate_enumerate_reduce():
    assert items(D.range(10).filter(lambda v: v % 3 == 0)) == [0, 3, 6, 9]
    assert len(D.range(10).filter(lambda v: v > 6)) == 3
    assert items(D.range(7).batch(3).unbatch()) == list(range(7))
    xy = D.from_tensor_slices((np.arange(6).reshape(3, 2), np.arange(3))).batch(2).unbatch()
    assert items(xy) == [([0, 1], 0), ([2, 3], 1), ([4, 5], 2)]
    ragged = D.range(1, 5).map(lambda n: np.arange(1, int(n) + 1))
    assert items(ragged.padded_batch(2)) == [[[1, 0], [1, 2]], [[1, 2, 3, 0], [1, 2, 3, 4]]]
    assert items(ragged.padded_batch(3, padded_shapes=[5], padding_values=-1))[0] == \
        [[1, -1, -1, -1, -1], [1, 2, -1, -1, -1], [1, 2, 3, -1, -1]]
    with pytest.raises(ValueError, match="padded shape"):
        items(ragged.padded_batch(4, padded_shapes=[2]))
    with pytest.raises(ValueError, match="padded_batch"):
        items(ragged.batch(4))
    assert items(D.zip((D.range(3), D.range(10, 14)))) == [(0, 10), (1, 11), (2, 12)]
    assert items(D.range(2).concatenate(D.range(5, 7))) == [0, 1, 5, 6]
    assert items(D.range(3, 5).enumerate()) == [(0, 3), (1, 4)]
    assert D.range(5).reduce(0, lambda s, v: s + int(v)) == 10
    with pytest.raises(TypeError, match="function"):
        D.range(3).map(3)
    with pytest.raises(ValueError, match="batch_size"):
        D.range(3).batch(0)
    with pytest.raises(ValueError, match="repeats forever"):
        D.range(3).repeat().concatenate(D.range(2))
    # (shuffling one that repeats forever goes through a buffer, as tf.data: test_keras_io_port_gaps_7)
    with pytest.raises(IndexError):
        D.range(3)[3]


def _model():
    pg.set_seed(0)
    m = pg.Sequential([pg.Input((3,)), pg.layers.Dense(4, activation="relu"), pg.layers.Dense(1)])
    m.compile(optimizer=pg.optimizers.SGD(0.05), loss="mse")
    return m


def test_fit_on_a_dataset_equals_fit_on_the_arrays_in_the_dataset_s_order():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(40, 3)).astype(np.float32), rng.normal(size=(40, 1)).astype(np.float32)
    a, b = _model(), _model()
    h1 = a.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0).history["loss"]
    ds = D.from_tensor_slices((x, y)).batch(8).prefetch(pg.data.AUTOTUNE)
    h2 = b.fit(ds, epochs=3, verbose=0).history["loss"]          # fit's shuffle=True must not reorder it
    np.testing.assert_allclose(h2, h1, rtol=1e-6)
    for wa, wb in zip(a.get_weights().values(), b.get_weights().values()):
        np.testing.assert_allclose(wb, wa, rtol=1e-6)
    assert np.isclose(b.evaluate(ds, verbose=0), a.evaluate(x, y, batch_size=8, verbose=0), rtol=1e-6)
    assert b.predict(ds.map(lambda u, v: u), verbose=0).shape == (40, 1)
    c = _model()                                                 # a dataset repeating forever: steps_per_epoch
    h3 = c.fit(D.from_tensor_slices((x, y)).batch(8).repeat(), epochs=3, steps_per_epoch=5, verbose=0)
    np.testing.assert_allclose(h3.history["loss"], h1, rtol=1e-6)


# --- from directories ----------------------------------------------------------------------------------

def _text_tree(root, counts):
    for cls, n in counts.items():
        os.makedirs(root / cls / "sub", exist_ok=True)
        for i in range(n):
            where = root / cls / ("sub" if i % 2 else "") / f"{i:02d}.txt"
            where.write_text(f"{cls} text number {i}", encoding="utf-8")
    (root / next(iter(counts)) / "ignored.csv").write_text("not a text file")
    (root / "stray.txt").write_text("at the top: no class")


def test_text_dataset_from_directory_labels_follow_the_files(tmp_path, capsys):
    _text_tree(tmp_path, {"neg": 7, "pos": 5})
    ds = pg.utils.text_dataset_from_directory(tmp_path, batch_size=4, seed=1)
    assert "Found 12 files belonging to 2 classes." in capsys.readouterr().out
    assert ds.class_names == ["neg", "pos"] and len(ds) == 3 and len(ds.file_paths) == 12
    seen = []
    for texts, labels in ds:
        assert texts.dtype.kind == "U" and labels.dtype == np.int32
        for t, label in zip(texts.tolist(), labels.tolist()):
            assert t.split()[0] == ["neg", "pos"][label]
            seen.append(t)
    assert sorted(seen) == sorted([f"neg text number {i}" for i in range(7)] + [f"pos text number {i}" for i in range(5)])
    ordered = pg.utils.text_dataset_from_directory(tmp_path, batch_size=None, shuffle=False, verbose=False)
    assert [str(t) for t, _ in ordered][:3] == ["neg text number 0", "neg text number 2", "neg text number 4"]
    short = pg.utils.text_dataset_from_directory(tmp_path, batch_size=12, max_length=3, label_mode="categorical",
                                                 verbose=False)
    t, y = short[0]
    assert set(t.tolist()) == {"neg", "pos"} and y.shape == (12, 2) and np.all(y.sum(1) == 1)
    binary = pg.utils.text_dataset_from_directory(tmp_path, label_mode="binary", batch_size=12, verbose=False)
    assert binary[0][1].shape == (12, 1) and binary[0][1].dtype == np.float32
    bare = pg.utils.text_dataset_from_directory(tmp_path, labels=None, batch_size=20, verbose=False)
    assert len(bare[0]) == 13                                    # every .txt, the stray one included


def test_validation_split_is_disjoint_and_needs_a_seed(tmp_path):
    _text_tree(tmp_path, {"a": 6, "b": 4, "c": 10})
    kw = dict(batch_size=None, validation_split=0.25, seed=7, verbose=False)
    train = pg.utils.text_dataset_from_directory(tmp_path, subset="training", **kw)
    val = pg.utils.text_dataset_from_directory(tmp_path, subset="validation", **kw)
    t2, v2 = pg.utils.text_dataset_from_directory(tmp_path, subset="both", **kw)
    assert len(train) == 15 and len(val) == 5
    assert set(train.file_paths).isdisjoint(val.file_paths) and len(set(train.file_paths + val.file_paths)) == 20
    assert t2.file_paths == train.file_paths and v2.file_paths == val.file_paths
    with pytest.raises(ValueError, match="seed"):
        pg.utils.text_dataset_from_directory(tmp_path, validation_split=0.2, subset="training")
    with pytest.raises(ValueError, match="subset"):
        pg.utils.text_dataset_from_directory(tmp_path, validation_split=0.2, seed=1)
    with pytest.raises(ValueError, match="exactly 2 classes"):
        pg.utils.text_dataset_from_directory(tmp_path, label_mode="binary")
    with pytest.raises(ValueError, match="class_names"):
        pg.utils.text_dataset_from_directory(tmp_path, class_names=["a", "b"])
    with pytest.raises(ValueError, match="existing folder"):
        pg.utils.text_dataset_from_directory(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="one label per file"):
        pg.utils.text_dataset_from_directory(tmp_path, labels=[0, 1])


def test_class_names_order_the_labels(tmp_path):
    _text_tree(tmp_path, {"a": 2, "b": 3})
    ds = pg.utils.text_dataset_from_directory(tmp_path, class_names=["b", "a"], batch_size=None, shuffle=False,
                                              verbose=False)
    assert ds.class_names == ["b", "a"]
    assert [(str(t).split()[0], int(y)) for t, y in ds] == [("b", 0)] * 3 + [("a", 1)] * 2


def _image_tree(root, Image):
    colors = {"red": (255, 0, 0), "blue": (0, 0, 255)}
    for cls, rgb in colors.items():
        os.makedirs(root / cls)
        for i, (w, h) in enumerate([(8, 6), (5, 5), (12, 4)]):
            Image.new("RGB", (w, h), rgb).save(root / cls / f"{i}.png")
    return colors


def test_image_dataset_from_directory(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    colors = _image_tree(tmp_path, Image)
    ds = pg.utils.image_dataset_from_directory(tmp_path, image_size=(4, 6), batch_size=4, seed=0, verbose=False)
    assert ds.class_names == ["blue", "red"] and len(ds) == 2
    for x, y in ds:
        assert x.shape[1:] == (4, 6, 3) and x.dtype == np.float32
        for img, label in zip(x, y):
            np.testing.assert_array_equal(img, np.broadcast_to(colors[ds.class_names[label]], (4, 6, 3)))
    gray = pg.utils.image_dataset_from_directory(tmp_path, color_mode="grayscale", image_size=(3, 3), batch_size=6,
                                                 data_format="channels_first", verbose=False)
    assert gray[0][0].shape == (6, 1, 3, 3)
    padded = pg.utils.image_dataset_from_directory(tmp_path, image_size=(4, 4), pad_to_aspect_ratio=True,
                                                   batch_size=None, shuffle=False, verbose=False)
    wide = np.asarray(padded[2][0])                              # blue, 12 x 4: padded to 12 x 12, then 4 x 4
    assert wide[0].sum() == 0 and wide[-1].sum() == 0 and wide[2, 2, 2] > 0
    cropped = pg.utils.image_dataset_from_directory(tmp_path, image_size=(4, 4), crop_to_aspect_ratio=True,
                                                    batch_size=None, shuffle=False, verbose=False)
    assert np.all(np.asarray(cropped[2][0])[..., 2] == 255)
    with pytest.raises(ValueError, match="image_size"):
        pg.utils.image_dataset_from_directory(tmp_path, image_size=(0, 4))
    with pytest.raises(ValueError, match="interpolation"):
        pg.utils.image_dataset_from_directory(tmp_path, interpolation="cubic-ish")
    with pytest.raises(ValueError, match="both"):
        pg.utils.image_dataset_from_directory(tmp_path, crop_to_aspect_ratio=True, pad_to_aspect_ratio=True)
    m = pg.Sequential([pg.Input((4, 6, 3)), pg.layers.Rescaling(1 / 255), pg.layers.Flatten(),
                       pg.layers.Dense(2, activation="softmax")])
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    hist = m.fit(ds, epochs=30, verbose=0).history
    assert hist["accuracy"][-1] == 1.0


def test_image_files_round_trip(tmp_path):
    pytest.importorskip("PIL.Image")
    a = np.arange(2 * 3 * 3, dtype=np.float32).reshape(2, 3, 3) * 10
    pg.utils.save_img(tmp_path / "x.png", a, scale=False)
    back = pg.utils.img_to_array(pg.utils.load_img(tmp_path / "x.png"))
    np.testing.assert_array_equal(back, a)
    assert pg.utils.img_to_array(pg.utils.load_img(tmp_path / "x.png", color_mode="grayscale")).shape == (2, 3, 1)
    assert pg.utils.img_to_array(pg.utils.load_img(tmp_path / "x.png"), data_format="channels_first").shape == \
        (3, 2, 3)
    stretched = pg.utils.img_to_array(pg.utils.array_to_img(a))
    assert stretched.min() == 0 and stretched.max() == 255
    with pytest.raises(ValueError, match="color_mode"):
        pg.utils.load_img(tmp_path / "x.png", color_mode="cmyk")
    with pytest.raises(ValueError, match="channels"):
        pg.utils.array_to_img(np.zeros((2, 2, 2)))


def test_bilinear_resize_matches_torch_half_pixel_rule():
    torch = pytest.importorskip("torch")
    from pyggml.utils.image_utils import resize_images
    rng = np.random.default_rng(0)
    img = rng.uniform(0, 255, size=(2, 5, 7, 3)).astype(np.float32)
    for size in [(10, 14), (3, 4), (5, 9), (8, 3)]:
        ours = resize_images(img, size, "bilinear")
        ref = torch.nn.functional.interpolate(torch.from_numpy(img).permute(0, 3, 1, 2), size=size, mode="bilinear",
                                              align_corners=False).permute(0, 2, 3, 1).numpy()
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-3)
        near = resize_images(img, size, "nearest")
        ref = torch.nn.functional.interpolate(torch.from_numpy(img).permute(0, 3, 1, 2), size=size,
                                              mode="nearest-exact").permute(0, 2, 3, 1).numpy()
        np.testing.assert_array_equal(near, ref)


def test_split_dataset():
    x, y = np.arange(10), np.arange(10) * 2
    left, right = pg.utils.split_dataset((x, y), left_size=0.8)
    assert len(left) == 8 and len(right) == 2 and items(right) == [(8, 16), (9, 18)]
    left, right = pg.utils.split_dataset(x, right_size=3, shuffle=True, seed=2)
    assert len(left) == 7 and sorted(items(left) + items(right)) == list(range(10))
    left, right = pg.utils.split_dataset(D.range(6))
    assert items(left) == [0, 1, 2] and items(right) == [3, 4, 5]
    with pytest.raises(ValueError, match="add up"):
        pg.utils.split_dataset(x, left_size=6, right_size=6)
    with pytest.raises(ValueError, match="fraction"):
        pg.utils.split_dataset(x, left_size=1.5)
