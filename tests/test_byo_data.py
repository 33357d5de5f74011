"""A team's own data and task: loaders, scikit-learn's other sets, regression targets, memory-mapped arrays.

The pipelines on a team's own data and task (regression; a loader with groups and one sigmoid output) run in
tests/test_examples.py, on the example projects as their READMEs build them.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from tracking.data.dataset import build_manifest, load_from_loader, load_source
from tracking.data.hashing import array_sha256
from tracking.errors import DataError


def test_builtin_sets_and_task_mismatch():
    cancer, diabetes = load_source("sklearn:breast_cancer"), load_source("sklearn:diabetes", task="regression")
    assert cancer.x.shape == (569, 30) and set(np.unique(cancer.y)) == {0, 1}
    assert diabetes.y.dtype == np.float32 and diabetes.x.shape == (442, 10)
    with pytest.raises(DataError, match=r"set data\.task: regression"):
        load_source("sklearn:diabetes")


def write_loader(root: Path, body: str) -> str:
    module = f"loader_{abs(hash(body))}"
    (root / f"{module}.py").write_text(f"import numpy as np\n\n\ndef load(n=20):\n    {body}\n")
    return f"{module}:load"


@pytest.mark.parametrize(
    ("body", "task", "message"),
    [
        (
            "return {'x': np.zeros((n, 2)), 'y': np.arange(n) % 2, 'weights': np.ones(n)}",
            "classification",
            "unknown key(s) weights",
        ),
        ("return {'x': np.zeros((n, 2)), 'y': np.arange(n) % 2 + 0.5}", "classification", "set data.task: regression"),
        (
            "return {'x': np.zeros((n, 2)), 'y': np.arange(n)[:, None] % 2 - 1}",
            "classification",
            "y.ravel() for a column of labels",
        ),
        ("return {'x': np.zeros((n, 2)), 'y': np.full(n, np.nan)}", "regression", "NaN or infinite targets"),
        (
            "return {'x': np.zeros((n, 2), dtype=complex), 'y': np.zeros(n)}",
            "regression",
            "array x has dtype complex128",
        ),
        (
            "return {'x': np.zeros((n, 2)), 'y': np.zeros(n), 'groups': np.array([{}] * n)}",
            "regression",
            "groups must be 1-D",
        ),
    ],
)
def test_loader_returns_are_checked(tmp_path: Path, body: str, task: str, message: str):
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_from_loader(write_loader(tmp_path, body), {}, tmp_path, task)


def test_loader_targets_of_any_shape(tmp_path: Path):
    spec = write_loader(tmp_path, "return {'x': np.ones((n, 4)), 'y': np.arange(n * 6).reshape(n, 2, 3)}")
    source = load_from_loader(spec, {"n": 12}, tmp_path, "regression")
    manifest = build_manifest({"train": {"x": source.x, "y": source.y}}, source, "regression")
    assert source.y.dtype == np.float32 and (manifest.n_outputs, manifest.target_shape) == (6, [2, 3])


@pytest.mark.parametrize(
    "x",
    [
        "np.ones((n, 40, 2), 'float32')",  # sequences for a GRU: no channel axis added
        "np.arange(n * 3).reshape(n, 3)",  # token ids stay integers
        "np.linspace(0, 1, n)",  # one float64 value per sample
        "np.array(['a cat', 'dog'] * (n // 2))",  # raw text for a TextVectorization layer
    ],
)
def test_features_are_kept_as_fit_takes_them(tmp_path: Path, x: str):
    """x of any rank and dtype Keras's fit takes is prepared, written and read back as the loader returned it."""
    from tracking.data.dataset import load_split, write_splits

    spec = write_loader(tmp_path, f"return {{'x': {x}, 'y': np.arange(n) % 2}}")
    source = load_from_loader(spec, {"n": 12}, tmp_path, "classification")
    returned = eval(x, {"np": np, "n": 12})
    assert source.x.shape == returned.shape and source.x.dtype == returned.dtype
    manifest = build_manifest({"train": {"x": source.x, "y": source.y}}, source)
    write_splits(tmp_path / "prepared", {"train": {"x": source.x, "y": source.y}}, manifest)
    back = load_split(tmp_path / "prepared", "train")["x"]
    assert back.dtype == returned.dtype and np.array_equal(back, returned)
    assert manifest.arrays["train/x"] == array_sha256(returned) and manifest.shapes["train"] == list(returned.shape[1:])


NAMED = "{'title': np.arange(n * 3).reshape(n, 3), 'body': np.array(['a cat', 'dog'] * (n // 2))}"


def test_named_inputs_are_kept_stored_and_hashed_by_name(tmp_path: Path):
    """x as a dict by input name, from a loader or from a .npz's x.<name> arrays: split, written and read back in
    its structure; every array is in the manifest under its name, and renaming a key changes the content hash."""
    from tracking.config.params import DataParams
    from tracking.data.dataset import load_split, write_splits
    from tracking.stages.prepare import split

    def prepared(source, folder: str):
        splits = split(source, DataParams(source="unused.npz"), 1)
        manifest = build_manifest(splits, source)
        write_splits(tmp_path / folder, splits, manifest)
        return splits, manifest

    loaded = load_from_loader(
        write_loader(tmp_path, f"return {{'x': {NAMED}, 'y': np.arange(n) % 2}}"), {}, tmp_path, "classification"
    )
    splits, manifest = prepared(loaded, "loader")
    back = load_split(tmp_path / "loader", "test")
    assert set(back["x"]) == {"title", "body"} and back["x"]["body"].dtype.kind == "U"
    assert all(np.array_equal(back["x"][key], splits["test"]["x"][key]) for key in ("title", "body"))
    assert {"train/x.title", "train/x.body", "test/x.body", "train/y"} <= set(manifest.arrays)
    assert manifest.shapes["train"] == {"title": [3], "body": []}

    arrays = eval(NAMED, {"np": np, "n": 20})
    np.savez(tmp_path / "named.npz", **{f"x.{key}": value for key, value in arrays.items()}, y=np.arange(20) % 2)
    assert prepared(load_source("named.npz", tmp_path), "npz")[1].content_sha256 == manifest.content_sha256
    renamed = {"headline" if key == "title" else key: value for key, value in arrays.items()}
    np.savez(tmp_path / "renamed.npz", **{f"x.{key}": value for key, value in renamed.items()}, y=np.arange(20) % 2)
    assert prepared(load_source("renamed.npz", tmp_path), "renamed")[1].content_sha256 != manifest.content_sha256


@pytest.mark.parametrize(
    ("x", "message"),
    [
        ("{'a b': np.zeros((n, 2))}", "x has key 'a b'; name each array after the model input it feeds"),
        ("{}", "x is an empty dict; give one array per model input"),
        ("{'title': [1] * n}", r"returned x\['title'\] as a list"),
        ("{'title': np.zeros((n, 2)), 'body': np.zeros(n - 1)}", "arrays differ in length"),
        ("{'title': np.full((n, 2), np.nan)}", "array x.title has NaN or infinite values"),
    ],
)
def test_named_inputs_are_checked(tmp_path: Path, x: str, message: str):
    with pytest.raises(DataError, match=message):
        load_from_loader(
            write_loader(tmp_path, f"return {{'x': {x}, 'y': np.arange(n) % 2}}"), {}, tmp_path, "classification"
        )


def test_sample_weights_are_split_stored_and_hashed_as_data(tmp_path: Path):
    """A loader's sample_weight (here class weights 1 and 5 per sample) is split with its samples, stored beside
    them and part of the content hash: other weights are other data."""
    from tracking.config.params import DataParams
    from tracking.data.dataset import load_split, write_splits
    from tracking.stages.prepare import split

    def prepared(weights: str):
        body = f"y = np.arange(n) % 2\n    return {{'x': np.ones((n, 3)), 'y': y, 'sample_weight': {weights}}}"
        source = load_from_loader(write_loader(tmp_path, body), {}, tmp_path, "classification")
        splits = split(source, DataParams(source="unused.npz"), 1)
        return splits, build_manifest(splits, source)

    splits, manifest = prepared("np.asarray([1.0, 5.0])[y]")
    assert np.array_equal(splits["train"]["sample_weight"], np.where(splits["train"]["y"] == 1, 5.0, 1.0))
    assert "train/sample_weight" in manifest.arrays
    write_splits(tmp_path / "prepared", splits, manifest)
    assert np.array_equal(load_split(tmp_path / "prepared", "val")["sample_weight"], splits["val"]["sample_weight"])
    assert prepared("np.asarray([1.0, 4.0])[y]")[1].content_sha256 != manifest.content_sha256
    with pytest.raises(DataError, match="sample_weight has a NaN, infinite or negative weight"):
        prepared("np.asarray([1.0, -1.0])[y]")
    with pytest.raises(DataError, match="sample_weight must be 1-D numbers"):
        prepared("np.ones((n, 2))")


def test_memory_mapped_array_is_hashed_in_chunks(tmp_path: Path):
    """A strided view of a memory map (every other column, 8 MB) is copied a block of rows at a time, not whole."""
    array = np.random.default_rng(0).random((4000, 1000), dtype="float32")
    np.save(tmp_path / "big.npy", array)
    mapped = np.load(tmp_path / "big.npy", mmap_mode="r")[:, ::2]
    expected = array_sha256(np.ascontiguousarray(array[:, ::2]))
    del array
    tracemalloc.start()
    digest = array_sha256(mapped)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert digest == expected and peak < 4 * 2**20


def test_scores_for_one_sigmoid_output_and_regression():
    from tracking.training.scoring import scores
    from tracking.training.task_scores import flat_metrics, summary_metrics

    y = np.array([0, 1, 1, 0])
    sigmoid = np.array([[0.2], [0.7], [0.4], [0.6]])
    crossentropy = -np.mean(np.log([0.8, 0.7, 0.4, 0.4]))
    evaluated = float(np.float32(crossentropy))  # the same loss as Keras reports it, in float32
    result = scores(
        y,
        sigmoid,
        "classification",
        2,
        np.array(["a", "a", "b", "b"]),
        {"loss": evaluated, "accuracy": 0.1, "auc": 0.3, "precision": 0.5},
    )
    assert result["predicted"].tolist() == [0, 1, 0, 1] and result["test_auc"] == pytest.approx(0.75)
    assert result["test_loss"] == crossentropy != evaluated and "test_crossentropy" not in result
    flat = flat_metrics(summary_metrics(result))
    assert flat["test_accuracy"] == 0.5 and flat["test_precision"] == 0.5 and flat["test_loss"] < 1  # ours win
    assert flat["test_group_b_fnr"] == 1.0 and flat["test_group_b_fpr"] == 1.0 and flat["test_group_a_fpr"] == 0.0

    targets = np.array([1.0, 2.0, 3.0, 4.0], dtype="float32")
    result = scores(targets, np.array([[1.0], [2.0], [3.0], [6.0]]), "regression", 1, np.array([0, 0, 1, 1]))
    assert (
        result["test_mae"] == 0.5 and result["test_loss"] == 1.0 and result["test_r2"] == pytest.approx(1 - 1.0 / 1.25)
    )
    assert result["per_group"] == {"0": {"mae": 0.0}, "1": {"mae": 1.0}}


def test_regression_churn_by_hand():
    from tracking.noise.statistics import pairwise_disagreement, regression_churn

    predictions = np.array([[0.0, 0.0], [1.0, 3.0], [2.0, 0.0]])
    matrix = pairwise_disagreement(predictions, "regression", target_std=2.0)
    assert matrix[0, 1] == regression_churn(predictions[0], predictions[1], 2.0) == pytest.approx(1.0)
    assert (
        matrix[1, 2] == pytest.approx((1 + 3) / 2 / 2) and np.allclose(matrix, matrix.T) and not matrix.diagonal().any()
    )


def test_labels_per_pixel_and_multi_hot_rows_are_taken_for_their_task(tmp_path: Path):
    """A (N, 16, 16) mask of class labels is classification data (counted label by label in the manifest); multi-hot
    rows are data.task multilabel's, refused elsewhere with the task to set, and refused there unless 0 and 1."""
    masks = write_loader(tmp_path, "return {'x': np.zeros((n, 4, 4, 1)), 'y': np.arange(n * 16).reshape(n, 4, 4) % 3}")
    source = load_from_loader(masks, {}, tmp_path, "classification")
    assert source.y.shape == (20, 4, 4) and source.y.dtype == np.int64
    manifest = build_manifest({"train": source.arrays()}, source, "classification")
    assert manifest.n_outputs == 3 and sum(manifest.class_counts["train"].values()) == 20 * 16
    rows = "np.stack([np.arange(n) % 2, np.arange(n) % 3 == 0, np.ones(n)], axis=1).astype(int)"
    hot = write_loader(tmp_path, f"return {{'x': np.zeros((n, 2)), 'y': {rows}}}")
    assert load_from_loader(hot, {}, tmp_path, "multilabel").y.shape == (20, 3)
    with pytest.raises(DataError, match=r"set data\.task: multilabel for multi-hot rows"):
        load_from_loader(
            write_loader(tmp_path, "return {'x': np.zeros((n, 2)), 'y': np.ones((n, 3))}"),
            {},
            tmp_path,
            "classification",
        )
    counts = write_loader(tmp_path, "return {'x': np.zeros((n, 2)), 'y': np.full((n, 3), 2)}")
    with pytest.raises(DataError, match=r"multi-hot rows of 0 and 1 .* got values \[2\]"):
        load_from_loader(counts, {}, tmp_path, "multilabel")


DATASET_LOADER = """import random

import keras
import numpy as np
import tensorflow as tf


def windows(n=300):
    series = np.arange(n, dtype="float32")[:, None] * np.ones((1, 3), dtype="float32")
    return keras.utils.timeseries_dataset_from_array(series[:-5], series[5:, 0], sequence_length=4, batch_size=16)


def shuffled(n=200):
    x = np.arange(n, dtype="float32")[:, None]
    return tf.data.Dataset.from_tensor_slices((x, np.arange(n) % 2)).shuffle(n).batch(32)


def text(n=40):
    words = np.asarray([f"w{i}" for i in range(n)])
    return tf.data.Dataset.from_tensor_slices(({"title": words, "count": np.arange(n)}, np.arange(n) % 2)).batch(16)


class Batches(keras.utils.PyDataset):
    def __init__(self, batches=8, rows=1000):
        super().__init__()
        self.batches, self.rows = batches, rows

    def __len__(self):
        return self.batches

    def __getitem__(self, index):
        x = np.full((self.rows, 250), index, dtype="float32")
        return x, np.full(self.rows, index % 2), np.ones(self.rows, dtype="float32")


def py_dataset(batches=8, rows=1000):
    return Batches(batches, rows)


def unbatched(n=10):
    return tf.data.Dataset.from_tensor_slices(np.zeros((n, 2), dtype="float32"))


class DataGenerator(keras.utils.PyDataset):  # the common one: shuffled with np.random when made, random's offset

    def __init__(self, n=96, batch=32):
        super().__init__()
        self.order, self.batch, self.offset = np.arange(n), batch, random.random()
        np.random.shuffle(self.order)

    def __len__(self):
        return len(self.order) // self.batch

    def __getitem__(self, index):
        rows = self.order[index * self.batch : (index + 1) * self.batch]
        return (rows[:, None] + self.offset).astype("float32"), rows % 2


def data_generator():
    return DataGenerator()


def augmented(n=64):  # keras.io's `ds.map(lambda x, y: (data_augmentation(x), y))` inside the loader
    data_augmentation = keras.Sequential([keras.layers.RandomFlip("horizontal"), keras.layers.RandomRotation(0.1)])
    x = np.zeros((n, 8, 8, 1), dtype="float32")
    return tf.data.Dataset.from_tensor_slices((x, np.arange(n) % 2)).batch(32).map(lambda x, y: (data_augmentation(x), y))
"""


def test_a_loader_may_return_a_tf_data_dataset_or_a_py_dataset(tmp_path: Path):
    """keras-io's timeseries_dataset_from_array, an unseeded shuffle, named text inputs and a PyDataset with sample
    weights are read batch by batch into arrays on disk: the same samples in the same order on every load (the
    shuffle draws from TensorFlow's global seed, set to data.split_seed), hashed like any loader's arrays, with
    memory for one batch; a dataset of other than (x, y) batches is one line."""
    (tmp_path / "streams.py").write_text(DATASET_LOADER)
    scratch = tmp_path / "scratch"
    windows = load_from_loader("streams:windows", {}, tmp_path, "regression", scratch / "a")
    assert isinstance(windows.x, np.memmap) and windows.x.shape == (292, 4, 3) and windows.y.shape == (292,)
    assert windows.x[10, 0, 0] == 10 and windows.y[10] == 15  # a window and its target, in the dataset's order
    first, again = (load_from_loader("streams:shuffled", {}, tmp_path, "classification", scratch / k) for k in "bc")
    assert array_sha256(first.x) == array_sha256(again.x) and not np.array_equal(first.x[:, 0], np.arange(200))
    other = load_from_loader("streams:shuffled", {}, tmp_path, "classification", scratch / "d", seed=3)
    assert array_sha256(other.x) != array_sha256(first.x)
    named = load_from_loader("streams:text", {}, tmp_path, "classification", scratch / "e")
    assert named.x["title"][3] == "w3" and named.x["count"].dtype == np.int64
    tracemalloc.start()
    weighted = load_from_loader("streams:py_dataset", {}, tmp_path, "classification", scratch / "f")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert weighted.x.shape == (8000, 250) and weighted.sample_weight.shape == (8000,)
    assert peak < 8 * 1000 * 250 * 4 / 2, f"reading 8 MB of batches peaked at {peak / 1e6:.1f} MB"
    with pytest.raises(DataError, match=r"batch 0 is a ndarray, not \(x, y\)"):
        load_from_loader("streams:unbatched", {}, tmp_path, "regression", scratch / "g")


def test_a_streamed_loader_is_split_into_the_same_arrays_and_its_copy_consumed_as_they_are_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The split of a loader's dataset, streamed to disk, writes the rows a split in memory takes, block by block
    from the last, cutting the streamed copy short behind each block (so the disk never holds it and the splits
    whole at once); the manifest is the same, its origin read before the copy is consumed."""
    from tracking.config.params import DataParams
    from tracking.data import partition
    from tracking.data.dataset import build_manifest, split_file
    from tracking.data.manifest import Origin
    from tracking.data.source import Source
    from tracking.stages.prepare import split

    (tmp_path / "streams.py").write_text(DATASET_LOADER)
    scratch, staging = tmp_path / "stream", tmp_path / "staging"
    data = DataParams(source=None, loader="streams:py_dataset", val_fraction=0.1)
    streamed = load_from_loader("streams:py_dataset", {}, tmp_path, "classification", scratch)
    copied = {name: np.array(array) for name, array in streamed.arrays().items()}
    in_memory = Source(copied["x"], copied["y"], None, streamed.name, copied["sample_weight"])
    origin = Origin.of(streamed.arrays())
    expected = split(in_memory, data, 7)
    cuts: dict[str, list[int]] = {}
    truncate = partition.os.truncate
    monkeypatch.setattr(partition, "BLOCK_BYTES", 100_000)  # 100 rows of x a block
    monkeypatch.setattr(
        partition.os,
        "truncate",
        lambda path, size: (cuts.setdefault(Path(path).name, []).append(size), truncate(path, size)),
    )
    found = split(streamed, data, 7, staging, scratch)
    monkeypatch.undo()
    assert cuts["x.raw"] == [row * 1000 for row in range(7900, -1, -100)]
    assert all(sizes[-1] == 0 for sizes in cuts.values())
    assert all((scratch / name).stat().st_size == 0 for name in cuts)
    for name, arrays in expected.items():
        assert set(found[name]) == set(arrays)
        for role, array in arrays.items():
            assert np.array_equal(found[name][role], array)
        for role in ("x", "sample_weight"):  # streamed to disk (the labels the checks made into an array are not)
            assert Path(found[name][role].filename) == (staging / split_file(name, role)).resolve()
    assert build_manifest(found, streamed, "classification", origin) == build_manifest(expected, in_memory)


def test_a_loader_shuffling_with_numpy_or_random_gives_one_hash_and_random_maps_are_refused(tmp_path: Path):
    """A DataGenerator shuffling with np.random and drawing from random when it is made gives the same samples on
    every prepare (the loader runs under generators seeded with data.split_seed, which moves them); a dataset that
    augments in a map (keras.io's pattern) is one line: its draws would be frozen into the test split too."""
    (tmp_path / "streams.py").write_text(DATASET_LOADER)
    scratch = tmp_path / "scratch"
    hashes = [
        array_sha256(load_from_loader("streams:data_generator", {}, tmp_path, "classification", scratch / k).x)
        for k in "ab"
    ]
    other = load_from_loader("streams:data_generator", {}, tmp_path, "classification", scratch / "c", seed=3)
    assert hashes[0] == hashes[1] != array_sha256(other.x)
    with pytest.raises(DataError, match=r"draws random numbers \(Stateless.*test split too.*set train.augment"):
        load_from_loader("streams:augmented", {}, tmp_path, "classification", scratch / "d")
