"""Issue 24: a model file is checked member by member before any array is read, and every
metadata field against a schema (counting.model.schema.check_archive and check_metadata).

Hostile archives are built on the fly from the shipped model: members rewritten with hand-made
``.npy`` headers, and a decompression bomb streamed in chunks, so the tests themselves stay small.
"""

from __future__ import annotations

import io
import pickle
import re
import tracemalloc
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy
from robust_helpers import DEFAULT_MODEL, REPO_ROOT, assert_one_error, model_parts, write_model

from counting.core.errors import ModelFileError
from counting.model import schema as model_schema
from counting.model.counting_model import CountingModel, load_model

SHIPPED = sorted((REPO_ROOT / "models").glob("*.npz"))


# ------------------------------------------------------------------ building archives
def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def npy_header(shape: tuple, descr: str = "<f8", version: tuple[int, int] = (1, 0)) -> bytes:
    buffer = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    if version == (1, 0):
        npy.write_array_header_1_0(buffer, header)
    else:
        npy.write_array_header_2_0(buffer, header)
    return buffer.getvalue()


def rebuild(target: Path, replace: dict[str, bytes | None], source: Path = DEFAULT_MODEL) -> Path:
    """A copy of ``source`` with members replaced by raw bytes (None: dropped; new names: added)."""
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in original.infolist():
            data = replace.get(info.filename, original.read(info))
            if data is not None:
                archive.writestr(info.filename, data)
        for name, data in replace.items():
            if name not in original.namelist() and data is not None:
                archive.writestr(name, data)
    return target


def bomb(target: Path, shape: tuple[int, ...], member: str = "centers.npy") -> Path:
    """``member`` declared as ``shape`` float64 and truly holding that many zeros, streamed."""
    with (
        zipfile.ZipFile(DEFAULT_MODEL) as original,
        zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive,
    ):
        for info in original.infolist():
            if info.filename != member:
                archive.writestr(info.filename, original.read(info))
                continue
            with archive.open(member, "w", force_zip64=True) as stream:
                stream.write(npy_header(shape))
                left, zeros = int(np.prod(shape)) * 8, bytes(1 << 22)
                while left:
                    step = min(left, len(zeros))
                    stream.write(zeros[:step])
                    left -= step
    return target


def refusal(path: Path, *fragments: str) -> str:
    """The one-line ModelFileError for ``path``, containing the file's name and every fragment."""
    with pytest.raises(ModelFileError) as caught:
        load_model(path)
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"{path}: "), line
    for fragment in fragments:
        assert fragment in line, line
    return line


# ------------------------------------------------------------------ 1. members: headers and sizes first
def test_decompression_bomb_is_refused_from_its_header_with_little_memory(tmp_path: Path) -> None:
    path = bomb(tmp_path / "bomb.npz", (32_000, 1000))  # 256 MB of zeros inside 1.2 MB
    assert path.stat().st_size < 4 << 20
    load_model(DEFAULT_MODEL)  # every import done before measuring
    tracemalloc.start()
    try:
        with pytest.raises(ModelFileError) as caught:
            load_model(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"refusing the bomb allocated {peak >> 20} MB"  # before: the 256 MB array
    refusal(path, "member centers.npy declares shape (32000, 1000) but the metadata says (25, 1000)")
    assert "not a counting model file" in str(caught.value)


def test_bomb_through_the_cli_is_one_line(cli, tmp_path: Path, features_file: Path) -> None:
    path = bomb(tmp_path / "bomb.npz", (4_000, 1000), member="x_mean.npy")
    line = assert_one_error(cli("count", "--features", features_file, "--model", path), str(path))
    assert "member x_mean.npy declares shape (4000, 1000) but the metadata says (1000,)" in line


CENTERS = np.zeros((25, 1000))
MEMBER_CASES: dict[str, tuple[dict[str, bytes | None], str]] = {
    # The header says what the metadata does not.
    "centres of the wrong count": (
        {"centers.npy": npy_bytes(np.zeros((26, 1000)))},
        "member centers.npy declares shape (26, 1000) but the metadata says (25, 1000) (n_centers from alpha.npy)",
    ),
    "features of the wrong count": (
        {"mean_coef.npy": npy_bytes(np.zeros((999, 1)))},
        "member mean_coef.npy declares shape (999, 1) but the metadata says (1000, 1)",
    ),
    "outputs of the wrong count": (
        {"y_mean.npy": npy_bytes(np.zeros(3))},
        "member y_mean.npy declares shape (3,) but the metadata says (1,)",
    ),
    "transposed centres": (
        {"centers_standardised.npy": npy_bytes(np.zeros((1000, 25)))},
        "member centers_standardised.npy declares shape (1000, 25)",
    ),
    "alpha with three axes": (
        {"alpha.npy": npy_bytes(np.zeros((25, 1, 1)))},
        "member alpha.npy declares shape (25, 1, 1); expected (n_centers, n_outputs)",
    ),
    "float32 centres": (
        {"centers.npy": npy_bytes(CENTERS.astype(np.float32))},
        "centers: expected numbers (float64), member centers.npy declares float32",
    ),
    "integer x_scale": (
        {"x_scale.npy": npy_bytes(np.ones(1000, dtype=np.int64))},
        "x_scale: expected numbers (float64), member x_scale.npy declares int64",
    ),
    "float validation indices": (
        {"validation_indices.npy": npy_bytes(np.zeros(100))},
        "validation_indices: expected integers",
    ),
    "validation rows other than the count recorded": (
        {"validation_indices.npy": npy_bytes(np.arange(7))},
        "member validation_indices.npy declares shape (7,) but the metadata says (100,)",
    ),
    "kernel parameter per centre of the wrong shape": (
        {"param__log_lengthscale.npy": npy_bytes(np.zeros((25, 1000)))},
        "member param__log_lengthscale.npy declares shape (25, 1000) but the metadata says (25,)",
    ),
    # What NumPy would unpickle or read whole.
    "object dtype": (
        {"centers.npy": npy_bytes(np.array([None, {"a": 1}], dtype=object))},
        "member centers.npy declares dtype object (Python objects or records), never read",
    ),
    "record dtype": (
        {"x_mean.npy": npy_bytes(np.zeros(1000, dtype=[("a", "<f8")]))},
        "member x_mean.npy declares dtype",
    ),
    "an array the model does not have": (
        {"extra.npy": npy_bytes(np.zeros(3))},
        "member extra.npy is not an array of a univariate-kernel model",
    ),
    "a member that is not .npy": ({"notes.txt": b"hello" * 1000}, "member 'notes.txt' is not an .npy array"),
    # Headers that lie about the data behind them, either way.
    "header smaller than its data": (
        {"centers.npy": npy_header((25, 1000)) + bytes(2 * 25 * 1000 * 8)},
        "member centers.npy declares shape (25, 1000) of float64 (200000 bytes) but holds 400000 bytes",
    ),
    "header larger than its data": (
        {"centers.npy": npy_header((25_000, 1000)) + bytes(25 * 1000 * 8)},
        "member centers.npy declares shape (25000, 1000) of float64 (200000000 bytes) but holds 200000 bytes",
    ),
    "negative side": ({"centers.npy": npy_header((-25, 1000))}, "member centers.npy declares shape (-25, 1000)"),
    "no .npy header": ({"centers.npy": b"\x00" * 64}, "member centers.npy has no valid .npy header"),
    # NumPy parses headers with ast and tokenize: an unclosed one raised TokenError, a traceback.
    "unclosed .npy header": (
        {"centers.npy": npy_header((25, 1000)).replace(b"}", b" ") + bytes(25 * 1000 * 8)},
        "member centers.npy has no valid .npy header (an array header is damaged)",
    ),
    "header not a literal": (
        {"centers.npy": npy_header((25, 1000)).replace(b"'<f8'", b"f(8)") + bytes(25 * 1000 * 8)},
        "member centers.npy has no valid .npy header (an array header is damaged)",
    ),
    "npy version 3": (
        {"x_mean.npy": b"\x93NUMPY\x03\x00" + npy_header((1000,), version=(2, 0))[8:] + bytes(8000)},
        "member x_mean.npy is .npy version 3.0; expected 1.0 or 2.0",
    ),
    # The metadata entry itself.
    "metadata that is not a string": ({"metadata.npy": npy_bytes(np.zeros(3))}, "member metadata.npy declares float64"),
    "metadata missing": ({"metadata.npy": None}, "no metadata entry"),
    "metadata that is not JSON": ({"metadata.npy": npy_bytes(np.array("{not json"))}, "metadata is not valid JSON"),
    "metadata nested beyond the stack": (
        {"metadata.npy": npy_bytes(np.array("[" * 100_000 + "]" * 100_000))},
        "metadata is not valid JSON",
    ),
    "metadata a list": ({"metadata.npy": npy_bytes(np.array("[1, 2]"))}, "metadata is a JSON list, not an object"),
}


@pytest.mark.parametrize("case", list(MEMBER_CASES))
def test_member_not_as_the_metadata_says_is_refused_before_reading(tmp_path: Path, case: str) -> None:
    replace, message = MEMBER_CASES[case]
    refusal(rebuild(tmp_path / "bad.npz", replace), "not a counting model file (", message)


def test_a_member_stored_twice_is_refused(tmp_path: Path) -> None:
    path = rebuild(tmp_path / "twice.npz", {})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile's "Duplicate name"
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr("centers.npy", npy_bytes(CENTERS))
    refusal(path, "member 'centers.npy' is stored twice")


def test_pickled_member_is_never_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "unpickled"

    class Touch:
        def __reduce__(self) -> tuple:
            return (Path.touch, (marker,))

    payload = npy_header((1,), descr="|O") + pickle.dumps(np.array([Touch()], dtype=object))
    refusal(rebuild(tmp_path / "pickle.npz", {"alpha.npy": payload}), "alpha.npy declares dtype object")
    assert not marker.exists()


def test_arrays_past_the_absolute_cap_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_schema, "MAX_MODEL_BYTES", 100_000)  # the shipped model's arrays: 425 kB
    refusal(DEFAULT_MODEL, "its arrays take 425,408 bytes uncompressed, more than the 100,000 a model file may hold")


def test_metadata_past_its_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        model_schema, "MAX_METADATA_BYTES", 10_000
    )  # the shipped model's: 625,904 bytes (its familiarity section)
    refusal(
        DEFAULT_MODEL, "member metadata.npy holds 625,904 bytes, more than the 10,000 of metadata a model file may have"
    )


# ------------------------------------------------------------------ 2. every metadata field against its schema
def _agp(update: dict) -> Callable[[dict], None]:
    return lambda document: document.update(update)


def _hyper(update: dict) -> Callable[[dict], None]:
    return lambda document: document["hyper_parameters"].update(update)


def _user(update: dict) -> Callable[[dict], None]:
    return lambda document: document["user_metadata"].update(update)


KINDS = "center, univariate, diagonal, lowrank, full"
FIELD_CASES: dict[str, tuple[Callable[[dict], None], str]] = {
    "kernel quantum": (_agp({"kernel": "quantum"}), f"metadata field 'kernel' is 'quantum'; expected one of {KINDS}"),
    "kernel not the hyper-parameters'": (
        _agp({"kernel": "full"}),
        "metadata field 'kernel' is 'full' but hyper_parameters.kernel makes it 'univariate'",
    ),
    "format version 7": (_agp({"format_version": 7}), "metadata field 'format_version' is 7; expected one of 1, 2, 3"),
    "format version 2.0": (_agp({"format_version": 2.0}), "metadata field 'format_version' is 2.0"),
    "n_outputs disagreeing with alpha": (
        _agp({"n_outputs": 4}),
        "member alpha.npy declares shape (25, 1) but the metadata says (25, 4)",
    ),
    "y_ndim 3": (_agp({"y_ndim": 3}), "metadata field 'y_ndim' is 3; expected one of 1, 2"),
    "best_epoch negative": (_agp({"best_epoch": -1}), "metadata field 'best_epoch' is -1; expected an integer from 0"),
    "mean_penalty as text": (_agp({"mean_penalty": "high"}), "metadata field 'mean_penalty' is 'high'"),
    "standardisation a number": (
        _agp({"standardisation": 5}),
        "metadata field 'standardisation' is 5; expected an object",
    ),
    "history of text": (_agp({"history": {"train_loss": ["low"]}}), "metadata field 'history'"),
    "lengthscale missing": (lambda d: d.pop("lengthscale"), "metadata field 'lengthscale' is missing"),
    "user metadata a list": (_agp({"user_metadata": [1]}), "metadata field 'user_metadata' is [1]; expected an object"),
    "optimizer rmsprop": (
        _hyper({"optimizer": "rmsprop"}),
        "metadata field 'hyper_parameters.optimizer' is 'rmsprop'; expected one of sgd, adam",
    ),
    "mean quadratic": (
        _hyper({"mean": "quadratic"}),
        "metadata field 'hyper_parameters.mean' is 'quadratic'; expected one of zero, constant, linear",
    ),
    "center method magic": (_hyper({"center_method": "magic"}), "'hyper_parameters.center_method' is 'magic'"),
    "validation loss l1": (_hyper({"validation_loss": "l1"}), "'hyper_parameters.validation_loss' is 'l1'"),
    "momentum 2": (_hyper({"momentum": 2}), "'hyper_parameters.momentum' is 2; expected a number from 0 to below 1"),
    "empty noise grid": (_hyper({"noise_grid": []}), "'hyper_parameters.noise_grid' is []"),
    "negative random state": (_hyper({"random_state": -1}), "'hyper_parameters.random_state' is -1"),
    "rank true": (_hyper({"rank": True}), "'hyper_parameters.rank' is True; expected an integer from 1"),
    "runtime tpu": (
        _user({"backbone": {"name": "efficientnet-lite0", "runtime": "tpu"}}),
        "metadata field 'backbone.runtime' is 'tpu'; expected one of onnxruntime, torch or null",
    ),
    "layout spiral": (_user({"layout": "spiral"}), "metadata field 'layout' is 'spiral'; expected one of frame"),
    "counting version a number": (_user({"counting_version": 3}), "metadata field 'counting_version' is 3"),
    "roi yes": (
        lambda d: d["user_metadata"]["preprocessing"].update(roi="yes"),
        "metadata field 'preprocessing.roi' is 'yes'; expected true or false",
    ),
    "roi without a mask": (
        lambda d: d["user_metadata"]["preprocessing"].update(roi=True),
        "preprocessing.roi: True does not match the ROI mask recorded",
    ),
    "interval method bayes": (
        lambda d: d["user_metadata"]["interval"].update(method="bayes"),
        "metadata field 'interval.method' is 'bayes'; expected one of split-conformal",
    ),
    "interval scale cubic": (
        lambda d: d["user_metadata"]["interval"].update(scale="cubic"),
        "metadata field 'interval.scale' is 'cubic'; expected one of absolute, sqrt, linear",
    ),
}


@pytest.mark.parametrize("case", list(FIELD_CASES))
def test_unknown_or_out_of_range_field_value_is_refused_naming_it(tmp_path: Path, case: str) -> None:
    change, message = FIELD_CASES[case]
    arrays, document = model_parts()
    change(document)
    refusal(write_model(tmp_path / "bad.npz", arrays, document), message)


def test_unknown_kernel_through_the_cli_is_one_line(cli, tmp_path: Path, features_file: Path) -> None:
    arrays, document = model_parts()
    document["kernel"] = "quantum"
    path = write_model(tmp_path / "quantum.npz", arrays, document)
    line = assert_one_error(cli("count", "--features", features_file, "--model", path), str(path))
    assert f"metadata field 'kernel' is 'quantum'; expected one of {KINDS}" in line


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (_agp({"quantum_flux": 1}), "'quantum_flux'"),
        (_hyper({"learning_schedule": "cosine"}), "'hyper_parameters.learning_schedule'"),
        (_user({"notes": "from a colleague", "reviewed": True}), "fields 'notes', 'reviewed'"),
    ],
)
def test_unknown_field_names_load_as_before_with_a_warning(tmp_path: Path, change, named: str) -> None:
    arrays, document = model_parts()
    change(document)
    path = write_model(tmp_path / "extra.npz", arrays, document)
    pattern = f"{re.escape(str(path))}: ignored metadata .*{re.escape(named)}.*unknown to this version of counting"
    with pytest.warns(UserWarning, match=pattern):
        model = load_model(path)
    features = np.random.default_rng(0).normal(size=(3, 1000))
    assert np.array_equal(model.predict_features(features), load_model(DEFAULT_MODEL).predict_features(features))


# ------------------------------------------------------------------ what must keep loading, unchanged
@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.name)
def test_shipped_models_pass_every_check_and_count_exactly_as_before(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(SHIPPED) >= 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not even an unknown-field warning
        model = load_model(path)
    features = np.random.default_rng(1).uniform(0.0, 2.0, size=(4, model.feature_dim))
    counts = model.predict_features(features)
    # The reader as it was: no archive check, no schema for the new fields.
    monkeypatch.setattr(model_schema, "check_archive", lambda path: None)
    monkeypatch.setattr(model_schema, "_check_fields", lambda *args, **kwargs: [])
    assert np.array_equal(counts, load_model(path).predict_features(features), equal_nan=True)
    assert np.isfinite(counts).all()


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.name)
def test_resaved_shipped_models_load_without_warnings(path: Path, tmp_path: Path) -> None:
    model = load_model(path)
    copy = model.save(tmp_path / path.name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every field the writer writes is one the reader knows
        again = load_model(copy)
    features = np.random.default_rng(2).uniform(0.0, 2.0, size=(3, model.feature_dim))
    assert np.array_equal(model.predict_features(features), again.predict_features(features))


@pytest.mark.parametrize("kernel", ["center", "univariate", "diagonal", "lowrank", "full", "multivariate"])
@pytest.mark.parametrize(("optimizer", "validation", "schedule"), [("adam", 20, "constant"), ("sgd", 0.5, "cosine")])
def test_every_kernel_kind_written_by_agp_passes_the_member_check(
    tmp_path: Path, kernel: str, optimizer: str, validation: float, schedule: str
) -> None:
    from agp import AGPRegressor

    X = np.random.default_rng(0).normal(size=(60, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a one-epoch fit may warn that it stopped early
        regressor = AGPRegressor(
            n_centers=5,
            kernel=kernel,
            optimizer=optimizer,
            rank=2,
            max_epochs=1,
            validation_fraction=validation,
            lr_schedule=schedule,
            random_state=0,
        ).fit(X, X[:, 0])
    path = CountingModel(regressor=regressor).save(tmp_path / f"{kernel}.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every hyper-parameter agp writes is one the schema knows
        model = load_model(path)
    assert np.array_equal(model.regressor.predict(X), regressor.predict(X))
    assert model.regressor.lr_schedule == schedule
