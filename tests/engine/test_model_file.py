"""Model files that describe more than they hold, or nonsense, are refused before anything is built.

Every file here is crafted in the test: a small real model's arrays
(`engine.io.model_arrays`) with one entry changed, or an .npy member whose
header lies about its size.  The refusals happen before any array of the
described size is allocated (tracemalloc's peak says so).
"""
from __future__ import annotations

import io
import numpy as np
import pytest

import engine
from crafted_models import huge_header, npz_bytes, small_arrays, zeros_model
from engine.io import ModelFileError, load_model, model_arrays, read_model_file
from engine.model_file import MAX_SPEC_DEPTH, SavedDimensions, spec_from_json
from quiet_tracing import traced_peak

pytestmark = pytest.mark.timeout(120)


def test_an_npy_header_promising_a_trillion_values_is_refused_before_reading():
    data = huge_header()

    def load():
        with pytest.raises(ModelFileError, match=r"(?s)'Y'.*1,000,000 x 1,000,000.*holds 64 bytes"):
            load_model(io.BytesIO(data))

    _, peak = traced_peak(load)
    assert peak < 2e6


def test_arrays_over_the_byte_budget_are_refused_from_their_headers():
    data = zeros_model("BayesianGPLVM", N=50_000, D=20, Q=2, M=10)  # ~10 MB of arrays, a few kB on disk
    assert len(data) < 100_000
    with pytest.raises(ModelFileError, match="unpacks to 10 MB of arrays, more than the 5 MB allowed"):
        load_model(io.BytesIO(data), max_bytes=5e6)


def test_the_size_check_sees_n_d_q_m_before_the_data_are_read():
    data = zeros_model("GPLVM", N=200_000, D=20, Q=2, M=0)  # Y alone: 32 MB unpacked
    seen = []

    def refuse(dims):
        seen.append(dims)
        raise ModelFileError("too big to build")

    def load():
        with pytest.raises(ModelFileError, match="too big to build"):
            load_model(io.BytesIO(data), check_size=refuse)

    _, peak = traced_peak(load)
    assert seen == [SavedDimensions("GPLVM", 200_000, 20, 2, 0)]
    assert peak < 8e6  # neither Y (32 MB) nor X_mean (3.2 MB) was read


def test_inducing_points_count_for_the_size_check():
    seen = []
    load_model(io.BytesIO(npz_bytes(small_arrays(M=7))), check_size=seen.append)
    assert seen == [SavedDimensions("BayesianGPLVM", 30, 4, 2, 7)]


def test_a_kernel_spec_nested_fifty_thousand_deep_is_refused_without_recursion():
    arrays = small_arrays()
    arrays["kernel_spec"] = np.array("[" * 50_000 + "]" * 50_000)
    with pytest.raises(ModelFileError, match="nested 50,000 levels deep"):
        load_model(io.BytesIO(npz_bytes(arrays)))


def test_spec_depth_counts_brackets_outside_strings_only():
    assert spec_from_json('{"type": "rbf", "name": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}')["type"] == "rbf"
    nested = "[" * MAX_SPEC_DEPTH + "]" * MAX_SPEC_DEPTH
    assert spec_from_json(nested) == eval(nested)
    with pytest.raises(ModelFileError, match="nested 33 levels"):
        spec_from_json("[" + nested + "]")
    with pytest.raises(ModelFileError, match="characters long"):
        spec_from_json('"' + "x" * 300_000 + '"')
    with pytest.raises(ModelFileError, match="not valid JSON"):
        spec_from_json("{nope")


@pytest.mark.parametrize("entry", ["free_vector", "param/Z", "param/noise_variance"])
def test_non_finite_parameters_are_refused_naming_the_entry(entry):
    arrays = small_arrays()
    arrays[entry] = np.full_like(arrays[entry], np.nan)
    with pytest.raises(ModelFileError, match=f"{entry}.* NaN or infinite"):
        load_model(io.BytesIO(npz_bytes(arrays)))


def test_parameter_shapes_are_checked_against_each_other_and_named():
    arrays = small_arrays(Q=2, M=5)
    arrays["param/Z"] = np.zeros((5, 3))
    arrays["free_vector"] = np.zeros(arrays["free_vector"].size + 5)
    with pytest.raises(ModelFileError, match=r"inducing points Z should have Q=2 columns.*\(5, 3\)"):
        load_model(io.BytesIO(npz_bytes(arrays)))
    arrays = small_arrays()
    arrays["param/X_mean"] = np.zeros((29, 2))
    with pytest.raises(ModelFileError, match=r"X_mean should have shape \(30, 2\)"):
        load_model(io.BytesIO(npz_bytes(arrays)))
    arrays = small_arrays()
    arrays["free_vector"] = arrays["free_vector"][:-1]
    with pytest.raises(ModelFileError, match="free_vector should hold the"):
        load_model(io.BytesIO(npz_bytes(arrays)))
    arrays = small_arrays()
    arrays["param/X_variance"][0, 0] = -1.0
    with pytest.raises(ModelFileError, match="X_variance .*not positive"):
        load_model(io.BytesIO(npz_bytes(arrays)))


def test_unknown_model_classes_and_bad_latent_dims_are_named():
    arrays = small_arrays()
    arrays["model_class"] = np.array("os.system")
    with pytest.raises(ModelFileError, match="unknown model class 'os.system'"):
        load_model(io.BytesIO(npz_bytes(arrays)))
    arrays = small_arrays()
    arrays["latent_dim"] = np.array([2, 2])
    with pytest.raises(ModelFileError, match="'latent_dim' should be a single value"):
        load_model(io.BytesIO(npz_bytes(arrays)))


@pytest.mark.parametrize("cls", ["GPLVM", "SparseGPLVM", "BayesianGPLVM", "StochasticBayesianGPLVM", "MRD",
                                 "DeepGP", "DynamicalBGPLVM"])
def test_every_model_class_passes_the_checks_and_reads_its_dimensions(cls):
    Y = np.random.default_rng(1).normal(size=(24, 4))
    if cls == "MRD":
        model = engine.MRD([Y[:, :2], Y[:, 2:]], 2, num_inducing=5)
    elif cls == "DeepGP":
        model = engine.DeepGP(Y, layer_dims=[3, 2], num_inducing=5)
    elif cls == "DynamicalBGPLVM":
        model = engine.DynamicalBGPLVM(Y, np.arange(24.0), 2, num_inducing=5)
    elif cls == "GPLVM":
        model = engine.GPLVM(Y, 2)
    else:
        model = getattr(engine, cls)(Y, 2, num_inducing=5)
    data = npz_bytes(model_arrays(model))
    arrays, dims = read_model_file(io.BytesIO(data))
    assert dims == SavedDimensions(cls, 24, 4, 2, 0 if cls == "GPLVM" else 5)
    loaded = load_model(io.BytesIO(data))
    assert loaded.objective() == pytest.approx(model.objective(), rel=1e-10)
