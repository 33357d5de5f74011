import numpy as np
import pytest

from tracking.data.dataset import build_manifest, check_pin, load_source
from tracking.data.hashing import array_sha256, weights_sha256
from tracking.data.manifest import Manifest
from tracking.data.source import Source
from tracking.errors import DataError, DataPinMismatch


def source(n: int = 40, classes: int = 4) -> Source:
    rng = np.random.default_rng(0)
    return Source(x=rng.random((n, 3, 3, 1), dtype="float32"), y=np.arange(n) % classes, groups=None, name="t")


def manifest_of(src: Source) -> Manifest:
    splits = {"train": {"x": src.x[:30], "y": src.y[:30]}, "test": {"x": src.x[30:], "y": src.y[30:]}}
    return build_manifest(splits, src)


def test_hash_covers_every_byte_not_a_sample():
    src = source(10_000)
    changed = src.x.copy()
    changed[-1, -1, -1, 0] = np.nextafter(changed[-1, -1, -1, 0], 2)
    assert array_sha256(src.x) != array_sha256(changed)
    assert array_sha256(src.x) == array_sha256(src.x.copy())


def test_hash_tells_dtype_and_shape_apart():
    values = np.arange(12, dtype="int32")
    assert array_sha256(values) != array_sha256(values.reshape(3, 4))
    assert array_sha256(values) != array_sha256(values.astype("int64"))
    assert weights_sha256([values]) != weights_sha256([values[:6], values[6:]])


def test_manifest_counts():
    manifest = manifest_of(source())
    assert manifest.n_samples == {"train": 30, "test": 10}
    assert manifest.class_counts["train"] == {"0": 8, "1": 8, "2": 7, "3": 7}
    assert set(manifest.arrays) == {"train/x", "train/y", "test/x", "test/y"}


def test_pin_mismatch_names_both_hashes_and_count_changes(tmp_path):
    pinned = manifest_of(source(40))
    (tmp_path / f"{pinned.content_sha256}.json").write_text(pinned.dumps())
    grown = manifest_of(source(44))
    with pytest.raises(DataPinMismatch) as caught:
        check_pin(grown, pinned.content_sha256, tmp_path)
    message = str(caught.value)
    assert pinned.content_sha256 in message and grown.content_sha256 in message
    assert "samples 40 -> 44 (+4)" in message
    assert "class 0 10 -> 11 (+1)" in message
    check_pin(grown, grown.content_sha256, tmp_path)
    check_pin(grown, None, tmp_path)


def test_pin_mismatch_without_record_still_names_hashes(tmp_path):
    with pytest.raises(DataPinMismatch, match="no record of the pinned data's counts"):
        check_pin(manifest_of(source()), "0" * 64, tmp_path)


def test_builtin_digits_loads_offline():
    digits = load_source("sklearn:digits")
    assert digits.x.shape == (1797, 8, 8, 1) and digits.y.max() == 9


@pytest.mark.parametrize(
    ("arrays", "expected"),
    [
        ({"x": np.zeros((4, 2))}, r"lacks array\(s\) y"),
        ({"x": np.zeros((4, 2)), "y": np.zeros(3, dtype=int)}, "differ in length"),
        ({"x": np.zeros((4, 2)), "y": np.zeros(4)}, "must be integer class labels"),
        ({"x": np.zeros((4, 2)), "y": np.array([0, 1, -1, 0])}, "negative label"),
        ({"x": np.array([[np.nan, 1.0]] * 4), "y": np.array([0, 1, 0, 1])}, "NaN or infinite"),
    ],
)
def test_bad_npz_sources(tmp_path, arrays, expected):
    np.savez(tmp_path / "data.npz", **arrays)
    with pytest.raises(DataError, match=expected):
        load_source("data.npz", tmp_path)


def test_targets_by_output_name_are_kept_as_given_and_hashed_under_their_names(tmp_path):
    """`y.<name>` in a `.npz` is a dict keyed by output name, whatever `data.task`: each output's targets kept
    as given (soft floats, multi-hot integers), split, counted by output and hashed under `y.<name>`."""
    rng = np.random.default_rng(1)
    priority, department = rng.random((40, 1)).astype("float32"), rng.integers(0, 2, (40, 4))
    np.savez(tmp_path / "data.npz", x=rng.random((40, 3)), **{"y.priority": priority, "y.department": department})
    found = load_source("data.npz", tmp_path)
    assert found.y["department"].dtype == department.dtype and np.array_equal(found.y["priority"], priority)
    splits = {"train": {"x": found.x[:30], "y": {k: v[:30] for k, v in found.y.items()}}}
    manifest = build_manifest(splits, found)
    assert set(manifest.arrays) == {"train/x", "train/y.department", "train/y.priority"}
    assert (manifest.n_outputs, manifest.target_shape) == (
        {"department": 4, "priority": 1},
        {"department": [4], "priority": [1]},
    )
    assert manifest.n_classes is None and manifest.n_samples == {"train": 30}


@pytest.mark.parametrize(
    ("arrays", "expected"),
    [
        ({"y": np.zeros(4, dtype=int), "y.a": np.zeros(4)}, "holds both an array y and arrays y.<name>"),
        ({"y.a": np.array(["a", "b", "c", "d"])}, r"array y\.a must hold numeric targets"),
        ({"y.a": np.array([0.0, np.inf, 1, 0])}, r"array y\.a has NaN or infinite"),
        ({"y.a": np.zeros(3)}, "differ in length"),
    ],
)
def test_bad_targets_by_output_name(tmp_path, arrays, expected):
    np.savez(tmp_path / "data.npz", x=np.zeros((4, 2)), **arrays)
    with pytest.raises(DataError, match=expected):
        load_source("data.npz", tmp_path)


def test_missing_and_corrupt_files(tmp_path):
    with pytest.raises(DataError, match=r"file 'nope\.npz' not found"):
        load_source("nope.npz", tmp_path)
    np.savez(tmp_path / "data.npz", x=np.zeros((50, 2)), y=np.zeros(50, dtype=int))
    (tmp_path / "cut.npz").write_bytes((tmp_path / "data.npz").read_bytes()[:100])
    with pytest.raises(DataError, match=r"not a readable \.npz"):
        load_source("cut.npz", tmp_path)
    with pytest.raises(DataError, match="unknown built-in"):
        load_source("sklearn:iris", tmp_path)


def test_scores_fit_labels_per_pixel_and_multi_hot_rows():
    """Labels per pixel are scored label by label (accuracy over pixels, mean IoU from their confusion matrix);
    multi-hot rows by Keras's mean binary cross-entropy, subset accuracy, hamming loss and per-label AUC; the churn
    of either counts every label."""
    from tracking.noise.statistics import pairwise_churn
    from tracking.training.scoring import scores

    y = np.array([[[0, 1], [1, 1]], [[0, 0], [1, 0]]])
    outputs = np.zeros((2, 2, 2, 2), dtype=np.float32)
    outputs[..., 1] = [[[0.2, 0.9], [0.1, 0.8]], [[0.3, 0.6], [0.7, 0.4]]]
    outputs[..., 0] = 1 - outputs[..., 1]
    found = scores(y, outputs, "classification", 2)
    assert found["predicted"].tolist() == [[[0, 1], [0, 1]], [[0, 1], [1, 0]]]
    assert found["test_accuracy"] == 6 / 8 and found["confusion"].tolist() == [[3, 1], [1, 3]]
    assert found["test_mean_iou"] == pytest.approx((3 / 5 + 3 / 5) / 2)
    assert found["probabilities"].shape == (2, 2, 2, 2)
    hot = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1]])
    p = np.array([[0.9, 0.2, 0.6], [0.3, 0.7, 0.4], [0.8, 0.6, 0.1], [0.1, 0.4, 0.9]], dtype=np.float32)
    multi = scores(hot, p, "multilabel", 3)
    assert multi["test_subset_accuracy"] == 0.75 and multi["test_hamming_loss"] == 1 / 12
    assert multi["test_loss"] == pytest.approx(float(keras_bce(hot, p)), rel=1e-5)
    assert multi["per_label_auc"] == {"0": 1.0, "1": 1.0, "2": 1.0} and multi["test_auc"] == 1.0
    assert pairwise_churn(np.stack([hot, hot ^ np.eye(4, 3, dtype=int)]))[0, 1] == 3 / 12


def keras_bce(y: np.ndarray, p: np.ndarray) -> float:
    """Keras's own binary cross-entropy of multi-hot rows, averaged over samples as `model.evaluate` reports it."""
    import keras

    return float(np.mean(keras.ops.convert_to_numpy(keras.losses.binary_crossentropy(y.astype("float32"), p))))


def test_the_predicted_against_actual_plot_draws_only_outputs_that_match_their_targets():
    """A model of several outputs whose mask output gives 3 class scores per pixel against (16, 16) labels: the
    evaluate stage's plot drew every output's values against every target value and crashed ("x and y must be the
    same size"), ending the run FAILED; it now draws the outputs that match value for value and names the others."""
    from tracking.stages.evaluate import comparable_values, predicted_figure
    from tracking.training.scoring import several_outputs_scores

    y = {"mask": np.zeros((5, 16, 16), dtype=np.int64), "size": np.arange(5, dtype=np.float32)[:, None]}
    outputs = {"mask": np.full((5, 16, 16, 3), 1 / 3, dtype=np.float32), "size": np.ones((5, 1), dtype=np.float32)}
    result = several_outputs_scores(y, outputs, {"loss": 1.0})
    actual, found, left_out = comparable_values(y, result)
    assert actual.tolist() == [0, 1, 2, 3, 4] and found.tolist() == [1] * 5 and left_out == ["mask"]
    figure = predicted_figure(actual, found, left_out)
    assert figure.axes[0].get_title() == "test predictions (not drawn: mask)"
