"""Common tests: one test per property, for every public function, driven by
one table (``tests/metric_registry.py``), after scikit-learn's
``sklearn/metrics/tests/test_common.py``.

Every function is called on the same small case (N = 80, K = 4, see
:class:`metric_registry.Case`), so a new public function needs one row of the
table and gets every test below:

* the table lists every public name of ``metrics_gpu.__all__`` once (a metric
  row, or a non-metric with its reason), and each row is consistent with the
  function's signature and scikit-learn;
* weights of ones give the unweighted result;
* integer weights give the result of repeating each sample that many times;
* the order of the samples does not matter;
* every backend gives the numpy backend's result;
* the scikit-learn namesake gives the same result, unweighted and weighted;
* swapping the two label arrays: symmetric metrics are unchanged, the others
  change (so the table cannot claim too little either), precision <-> recall;
* bad input (arrays of different lengths, a negative or misshapen weight, a
  negative count) raises ValueError naming the argument;
* NumPy inputs give NumPy results (arrays, NumPy or Python scalars) of the
  output kind the table says; torch CPU tensors give torch CPU tensors of the
  same numbers (the reports: host values). Device inputs (CuPy, torch) and
  the option variants of each function are tests/test_dispatch.py's
  ``test_results_live_where_the_inputs_live`` and ``test_torch_in_torch_out``.

The property tests run on every backend (the ``backend`` fixture); the
scikit-learn and placement tests on the backend in force (numpy by default,
emulated in CI's ``METRICS_GPU_BACKEND=emulated -m "not per_backend"`` pass).
A known defect of the package is a row's ``defects`` entry: that case is a
strict expected failure, which fails once the defect is fixed.

Depth is elsewhere: the per-property tests with many inputs are in
tests/test_properties.py (hypothesis: relabelling, weights of ones, merge,
``ignore_index``), parity over K, weights, averages and options in
tests/test_sklearn_parity.py, tests/test_scores.py and tests/test_ranking.py,
every input dtype and layout in tests/test_fuzz.py, the messages of every bad
input in tests/test_validation.py.

Tolerances. Results that differ only by the order of float sums (weights of
1.0 against none, repeats against integer weights, permuted float weights,
another backend's reduction, scikit-learn's formulas) are compared to
``rtol=1e-12`` with ``atol=1e-14`` for values that cancel to about 0 (MCC,
kappa); the differences seen are below 1e-15. Counts (``exact`` rows) without
weights or with integer weights are compared exactly; the numpy backend
against itself too.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

import numpy as np
import pytest
import sklearn.metrics as skm

import metrics_gpu as mg
from metric_registry import (
    INPUTS,
    METRICS,
    NOT_METRICS,
    OUTPUTS,
    REGISTRY,
    SEED,
    SWAPPABLE_INPUTS,
    Metric,
    flatten,
    leaves,
    make_case,
    parameters,
)

CASE = make_case(np.random.default_rng(SEED))

RTOL = 1e-12
ATOL = 1e-14


def assert_same(got, expected, *, exact=False, rtol=RTOL, atol=ATOL, what=""):
    """Two results hold the same numbers at the same paths (see the module docstring)."""
    got, expected = flatten(got), flatten(expected)
    assert got.keys() == expected.keys(), (
        f"{what}: parts differ: {sorted(got.keys() ^ expected.keys())}")
    for path, value in expected.items():
        where = f"{what}: {path}"
        assert got[path].shape == value.shape, f"{where}: {got[path].shape} != {value.shape}"
        if exact:
            np.testing.assert_array_equal(got[path], value, err_msg=where)
        else:
            np.testing.assert_allclose(got[path], value, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=where)


def rows(test: str, where=lambda metric: True):
    """The metrics ``test`` applies to, as pytest params; a known defect of the
    package for that test (the row's ``defects``) is a strict expected failure."""
    return [pytest.param(metric, id=metric.name, marks=[pytest.mark.xfail(
                strict=True, raises=AssertionError, reason=metric.defects[test])]
                if test in metric.defects else [])
            for metric in METRICS if where(metric)]


def weighted(metric: Metric) -> bool:
    return metric.weight_arg is not None


# -- the table ------------------------------------------------------------------------


def test_every_public_name_is_listed_once():
    public = set(mg.__all__)
    names = [metric.name for metric in METRICS]
    assert len(names) == len(set(names)), "a metric listed twice in metric_registry.METRICS"
    unlisted = public - set(REGISTRY) - set(NOT_METRICS)
    assert not unlisted, (f"public names missing from tests/metric_registry.py (a Metric "
                          f"row, or NOT_METRICS with the reason): {sorted(unlisted)}")
    not_public = (set(REGISTRY) | set(NOT_METRICS)) - public
    assert not not_public, f"listed but not in metrics_gpu.__all__: {sorted(not_public)}"
    assert not set(REGISTRY) & set(NOT_METRICS)
    for name in REGISTRY:
        assert inspect.isfunction(REGISTRY[name].func), f"{name} is listed as a metric"


@pytest.mark.parametrize("metric", rows("row"))
def test_row_is_consistent(metric):
    """What a row claims agrees with the function's signature and with
    scikit-learn, and every property it lacks has its reason in ``notes``."""
    assert metric.inputs in INPUTS and metric.output in OUTPUTS
    params = parameters(metric)
    assert set(metric.options) <= set(params), "options the function does not take"
    if metric.weight_arg is None:
        assert "sample_weight" not in params and "weight" not in params
        assert "sample_weight" in metric.notes
    else:
        assert metric.weight_arg in params
    namesake = getattr(skm, metric.name, None)
    assert metric.sklearn is namesake, f"scikit-learn's namesake: {namesake}"
    if namesake is None:
        assert "sklearn" in metric.notes
    else:
        sklearn_params = inspect.signature(namesake).parameters
        options = metric.options if metric.sklearn_options is None else metric.sklearn_options
        assert set(options) <= set(sklearn_params)
    assert (metric.symmetric is None) == (metric.inputs not in SWAPPABLE_INPUTS)
    if not metric.symmetric:
        assert "symmetric" in metric.notes
    if not metric.permutation_invariant:
        assert "permutation" in metric.notes
    if not metric.checks_negative_weight:
        assert "negative_weight" in metric.notes
    assert metric.swap_partner is None or metric.swap_partner in REGISTRY


# -- weights ------------------------------------------------------------------------------


@pytest.mark.parametrize("metric", rows("unit_weights", weighted))
def test_unit_weights_equal_unweighted(backend, metric):
    arrays = CASE.arrays(metric.inputs)
    ones = np.ones(CASE.n)
    assert_same(metric.call(arrays, ones, put=backend.asarray),
                metric.call(arrays, put=backend.asarray), what=metric.name)


@pytest.mark.parametrize("metric", rows("integer_weights", weighted))
def test_integer_weights_equal_repetition(backend, metric):
    arrays = CASE.arrays(metric.inputs)
    repeated = tuple(np.repeat(array, CASE.int_weights, axis=0) for array in arrays)
    assert_same(metric.call(arrays, CASE.int_weights, put=backend.asarray),
                metric.call(repeated, put=backend.asarray), exact=metric.exact,
                what=metric.name)


# -- order of the samples -----------------------------------------------------------------


@pytest.mark.parametrize("metric", rows("permutation",
                                        lambda m: m.on_samples and m.permutation_invariant))
def test_sample_order_does_not_matter(backend, metric):
    """Samples and their (float) weights in another order: the same result,
    to the float-sum tolerance."""
    order = np.random.default_rng(SEED + 1).permutation(CASE.n)
    arrays = CASE.arrays(metric.inputs)
    weight = CASE.float_weights if weighted(metric) else None
    shuffled = tuple(array[order] for array in arrays)
    assert_same(metric.call(shuffled, None if weight is None else weight[order],
                            put=backend.asarray),
                metric.call(arrays, weight, put=backend.asarray), what=metric.name)


# -- backends and scikit-learn ---------------------------------------------------------------


@pytest.mark.parametrize("metric", rows("backends"))
def test_backend_equals_numpy(backend, metric):
    """Unweighted and float-weighted; the numpy backend against itself exactly
    (deterministic), counts exactly on every backend when unweighted."""
    arrays = CASE.arrays(metric.inputs)
    for weight in (None, CASE.float_weights) if weighted(metric) else (None,):
        with mg.use_backend("numpy"):
            expected = metric.call(arrays, weight)
        got = metric.call(arrays, weight, put=backend.asarray)
        exact = backend.name == "numpy" or (metric.exact and weight is None)
        assert_same(got, expected, exact=exact,
                    what=f"{metric.name} ({'un' if weight is None else 'float-'}weighted)")


@pytest.mark.parametrize("metric", rows("sklearn", lambda m: m.sklearn is not None))
def test_sklearn_namesake_agrees(metric):
    """On the backend in force (numpy by default; CI's second pass,
    METRICS_GPU_BACKEND=emulated, runs it through the kernels)."""
    arrays = CASE.arrays(metric.inputs)
    for weight in (None, CASE.float_weights) if weighted(metric) else (None,):
        assert_same(metric.call(arrays, weight), metric.call_sklearn(arrays, weight),
                    what=f"{metric.name} ({'un' if weight is None else 'float-'}weighted)")


# -- symmetry ------------------------------------------------------------------------------


@pytest.mark.parametrize("metric", rows("symmetry", lambda m: m.symmetric is not None))
def test_swapping_the_label_arrays(backend, metric):
    """Symmetric rows: f(a, b) == f(b, a). The others must change (the case has
    every class in both arrays and differs from its swap), and a swap partner
    g has f(a, b) == g(b, a)."""
    arrays = CASE.arrays(metric.inputs)
    swapped = metric.call(arrays, put=backend.asarray, swap=True)
    straight = metric.call(arrays, put=backend.asarray)
    if metric.symmetric:
        assert_same(swapped, straight, what=metric.name)
    else:
        with pytest.raises(AssertionError):
            assert_same(swapped, straight, what=metric.name)
    if metric.swap_partner is not None:
        assert_same(swapped, REGISTRY[metric.swap_partner].call(arrays, put=backend.asarray),
                    what=f"{metric.name} swapped vs {metric.swap_partner}")


# -- bad input -------------------------------------------------------------------------------


def _bad_inputs(metric: Metric):
    """(kind, arrays, weight, argument names any of which the message must name)."""
    arrays = CASE.arrays(metric.inputs)
    array_names = parameters(metric)[len(metric.leading):len(metric.leading) + len(arrays)]
    if not metric.on_samples:  # a K x K matrix: not square, a negative count
        negative = arrays[0].copy()
        negative[1, 2] = -1
        yield "lengths", (arrays[0][:, :-1],), None, array_names
        yield "negative_count", (negative,), None, array_names
        return
    yield "lengths", arrays[:-1] + (arrays[-1][:-1],), None, array_names
    if weighted(metric):
        negative = CASE.float_weights.copy()
        negative[3] = -1.0
        yield "negative_weight", arrays, negative, [metric.weight_arg]
        yield "weight_length", arrays, CASE.float_weights[:-1], [metric.weight_arg]


BAD_INPUTS = [pytest.param(metric, kind, id=f"{metric.name}-{kind}", marks=[
                  pytest.mark.xfail(strict=True, raises=AssertionError,
                                    reason=metric.defects[kind])]
                  if kind in metric.defects else [])
              for metric in METRICS for kind, *_ in _bad_inputs(metric)]


@pytest.mark.parametrize("metric, kind", BAD_INPUTS)
def test_bad_input_raises_value_error_naming_the_argument(backend, metric, kind):
    _, arrays, weight, names = next(bad for bad in _bad_inputs(metric) if bad[0] == kind)
    with pytest.raises(ValueError) as error:
        metric.call(arrays, weight, put=backend.asarray)
    pattern = r"\b(" + "|".join(map(re.escape, names)) + r")\b"
    assert re.search(pattern, str(error.value)), (
        f"{metric.name}: the message names none of {names}: {error.value}")


# -- result placement and kind --------------------------------------------------------------


OUTPUT_TYPES = {
    "scalar": lambda r: isinstance(r, (float, np.floating)) and np.ndim(r) == 0,
    "per_class": lambda r: isinstance(r, np.ndarray) and r.ndim == 1,
    "matrix": lambda r: isinstance(r, np.ndarray) and r.ndim == 2,
    "matrices": lambda r: isinstance(r, np.ndarray) and r.ndim == 3,
    "tuple": lambda r: isinstance(r, tuple),
    "bundle": dataclasses.is_dataclass,
    "scalars": lambda r: isinstance(r, dict) and all(
        isinstance(v, (float, np.floating)) and np.ndim(v) == 0 for v in r.values()),
    "report": lambda r: isinstance(r, (dict, mg.LabelReport)),
}


@pytest.mark.parametrize("metric", rows("placement"))
def test_numpy_inputs_give_numpy_results(metric):
    """NumPy in, NumPy (or Python scalars) out, of the row's output kind, on the
    backend in force (numpy by default; emulated in CI's second pass). Device
    inputs: tests/test_dispatch.py."""
    result = metric.call(CASE.arrays(metric.inputs))
    assert OUTPUT_TYPES[metric.output](result), (
        f"{metric.name}: {type(result).__name__} is not {metric.output}")
    for leaf in leaves(result):
        assert isinstance(leaf, (np.ndarray, np.generic, float, int)), (metric.name, type(leaf))


@pytest.mark.parametrize("metric", rows("torch"))
def test_torch_cpu_inputs_give_torch_results(backend, metric):
    """torch CPU tensors in (weights too): the numpy backend's numbers of NumPy
    inputs, as CPU torch tensors; the reports, host values by design (see
    ``LabelReport``), as NumPy and Python numbers. Curves return reversed views
    of their scans, which torch cannot share: this holds the conversion to them."""
    torch = pytest.importorskip("torch")
    arrays = CASE.arrays(metric.inputs)
    for weight in (None, CASE.float_weights) if weighted(metric) else (None,):
        with mg.use_backend("numpy"):
            expected = metric.call(arrays, weight)
        got = metric.call(arrays, weight, put=torch.from_numpy)
        what = f"{metric.name} ({'un' if weight is None else 'float-'}weighted)"
        assert_same(got, expected, exact=backend.name == "numpy" or (
            metric.exact and weight is None), what=what)
        for leaf in leaves(got):
            if metric.output == "report":
                assert not isinstance(leaf, torch.Tensor), (what, type(leaf))
            else:
                assert isinstance(leaf, torch.Tensor), (what, type(leaf))
                assert leaf.device.type == "cpu", what
