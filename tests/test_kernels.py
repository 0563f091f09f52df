"""The raw kernels (``kernels/confusion.cu``) against the NumPy reference.

Every test runs on each kernel backend that can run here: ``emulated`` (the
same ``.cu`` compiled for the CPU, with CUDA semantics) and ``cuda`` (CuPy on
a GPU); an unavailable one is skipped with the reason, as in ``conftest.py``.
Inputs go to the backend with :meth:`KernelCase.put` (``cupy.asarray`` on
``cuda``) and results come back with :meth:`KernelCase.get` (``.get()``).

Counts must equal NumPy's exactly, dtype included (int64 without weights or
with integer weights, float64 with float weights); float-weighted sums agree
to ``rtol=1e-12`` (only the summation order differs).

Every launch path is exercised, and :func:`test_kernel_choice` checks which
kernel ran: ``confusion_binary`` (K = 2 unweighted), ``confusion_shared``
with and without warp aggregation, ``confusion_global`` (K = 120 unweighted:
120*120*4 B > 48 KiB; K = 80 weighted: 80*80*8 B > 48 KiB) and
``class_statistics`` (K = 256,000).

The emulated device runs 64-thread blocks and at most 16 blocks, so a few
thousand samples already take several grid-stride steps; inputs are kept
small except where a path needs more.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest

import metrics_gpu
from conftest import KernelCase, Launch
from metrics_gpu.backends.selection import get_backend_implementation

NUMPY = get_backend_implementation("numpy")
RTOL = 1e-12

LABEL_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "bool")
# K of the per-class statistics tests: a K x K matrix would be 512 GB.
HUGE_K = 256_000


class GuardedZeros:
    """``device.zeros`` with canary bytes on both sides of every allocation.

    A kernel that writes just outside an output (index -1, K, K*K, ...) changes
    a canary; :meth:`check` finds it.
    """

    PAD = 4096
    CANARY = 0xA5

    def __init__(self, case: KernelCase):
        self.case = case
        self.buffers = []

    def __call__(self, shape, dtype):
        xp = self.case.device.xp
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        buffer = xp.full(nbytes + 2 * self.PAD, self.CANARY, dtype=np.uint8)
        buffer[self.PAD:self.PAD + nbytes] = 0
        self.buffers.append((buffer, nbytes))
        return buffer[self.PAD:self.PAD + nbytes].view(dtype).reshape(shape)

    def check(self):
        assert self.buffers, "no allocation went through device.zeros"
        for index, (buffer, nbytes) in enumerate(self.buffers):
            host = self.case.get(buffer)
            before = np.flatnonzero(host[:self.PAD] != self.CANARY)
            after = np.flatnonzero(host[self.PAD + nbytes:] != self.CANARY)
            assert before.size == 0 and after.size == 0, (
                f"allocation {index} ({nbytes} bytes) written out of bounds: "
                f"{before.size} bytes before it (offsets {(before - self.PAD)[:8].tolist()}), "
                f"{after.size} bytes after it (offsets {after[:8].tolist()})"
            )


@pytest.fixture
def guarded(case, monkeypatch):
    zeros = GuardedZeros(case)
    monkeypatch.setattr(case.device, "zeros", zeros)
    return zeros


# -- calls and comparisons ---------------------------------------------------------------


def kernel_confusion(case, y_true, y_pred, *, scores=False, **kwargs):
    """accumulate_confusion on the backend; inputs already on it, results as NumPy."""
    pred = case.impl.argmax_scores(y_pred) if scores else y_pred
    matrix, observed, invalid = case.impl.accumulate_confusion(y_true, pred, **kwargs)
    return case.get(matrix), case.get(observed), int(case.get(invalid))


def kernel_statistics(case, y_true, y_pred, *, scores=False, **kwargs):
    pred = case.impl.argmax_scores(y_pred) if scores else y_pred
    stats = case.impl.class_statistics(y_true, pred, **kwargs)
    return {name: case.get(getattr(stats, name)) for name in STATISTICS_FIELDS}


def reference_labels(y_pred, scores):
    """NumPy's row argmax (exact on the float32 widening of half-precision scores)."""
    if not scores:
        return y_pred
    if y_pred.dtype.itemsize < 4:
        y_pred = y_pred.astype(np.float32)
    return np.argmax(y_pred, axis=1)


def reference_confusion(y_true, y_pred, *, scores=False, deterministic=None, **kwargs):
    del deterministic  # the NumPy backend has no such option
    return NUMPY.accumulate_confusion(y_true, reference_labels(y_pred, scores), **kwargs)


STATISTICS_FIELDS = ("true_positives", "support", "predicted", "total", "observed", "invalid",
                     "linear_disagreement", "quadratic_disagreement")


def reference_statistics(y_true, y_pred, *, scores=False, deterministic=None, **kwargs):
    del deterministic
    stats = NUMPY.class_statistics(y_true, reference_labels(y_pred, scores), **kwargs)
    return {name: None if getattr(stats, name) is None else np.asarray(getattr(stats, name))
            for name in STATISTICS_FIELDS}


def assert_counts(actual, expected, what, *, rtol=RTOL):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype}, NumPy {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape}, NumPy {expected.shape}"
    if actual.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=0, err_msg=what)
    else:
        bad = np.argwhere(actual != expected)
        assert bad.size == 0, (
            f"{what}: {len(bad)} entries differ, first at {bad[0].tolist()}: "
            f"{actual[tuple(bad[0])]} vs NumPy {expected[tuple(bad[0])]}"
        )


def assert_same_confusion(got, want, *, rtol=RTOL):
    matrix, observed, invalid = got
    ref_matrix, ref_observed, ref_invalid = want
    assert_counts(matrix, ref_matrix, "matrix", rtol=rtol)
    assert_counts(observed, ref_observed, "observed")
    assert invalid == ref_invalid, f"n_invalid {invalid}, NumPy {ref_invalid}"


def assert_same_statistics(got, want, *, exact_moments=True, rtol=RTOL):
    for name in ("true_positives", "support", "predicted", "total", "observed"):
        assert_counts(got[name], want[name], name, rtol=rtol)
    assert int(got["invalid"]) == int(want["invalid"]), (
        f"invalid {got['invalid']}, NumPy {want['invalid']}")
    for name in ("linear_disagreement", "quadratic_disagreement"):
        if want[name] is None:
            assert got[name] is None, f"{name} given without moments"
            continue
        value, expected = float(got[name]), float(want[name])
        if exact_moments:
            assert value == expected, f"{name}: {value!r}, NumPy {expected!r}"
        else:
            assert value == pytest.approx(expected, rel=rtol, abs=0), name


def compare_confusion(case, y_true, y_pred, *, sample_weight=None, scores=False, rtol=RTOL,
                      **kwargs):
    """Run both backends on the same host inputs and compare."""
    got = kernel_confusion(case, case.put(y_true), case.put(y_pred), scores=scores,
                           sample_weight=case.put(sample_weight), **kwargs)
    want = reference_confusion(y_true, y_pred, scores=scores, sample_weight=sample_weight,
                               **kwargs)
    assert_same_confusion(got, want, rtol=rtol)
    return got


def compare_statistics(case, y_true, y_pred, *, sample_weight=None, scores=False,
                       exact_moments=True, **kwargs):
    got = kernel_statistics(case, case.put(y_true), case.put(y_pred), scores=scores,
                            sample_weight=case.put(sample_weight), **kwargs)
    want = reference_statistics(y_true, y_pred, scores=scores, sample_weight=sample_weight,
                                **kwargs)
    assert_same_statistics(got, want, exact_moments=exact_moments)
    return got


# -- data --------------------------------------------------------------------------------


def make_labels(rng, n, k, dtype="int64", agree=0.5):
    """(y_true, y_pred) of class codes in [0, k); about `agree` of the samples match."""
    if dtype in ("bool", bool):
        k = 2
    y_true = rng.integers(0, k, n)
    y_pred = np.where(rng.random(n) < agree, y_true, rng.integers(0, k, n))
    return y_true.astype(dtype), y_pred.astype(dtype)


def make_weights(rng, n, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        weights = rng.random(n) * 10.0
        weights[rng.random(n) < 0.05] = 0.0
        return weights.astype(dtype)
    if dtype.kind == "b":
        return rng.random(n) < 0.8
    return rng.integers(0, 100, n).astype(dtype)


def make_scores(rng, n, k, dtype, *, special_rows=True):
    """(n, k) scores with frequent ties (integer values) and, optionally, rows with
    NaN (one, or several: the first wins), all -inf, +inf ties and -0.0/0.0 ties."""
    scores = rng.integers(0, 4, (n, k)).astype(np.float64)
    if special_rows and n >= 40:
        rows = rng.permutation(n)
        one_nan, two_nan, minus_inf, plus_inf, zeros = np.array_split(rows[:40], 5)
        scores[one_nan, rng.integers(0, k, one_nan.size)] = np.nan
        for row in two_nan:
            scores[row, rng.choice(k, min(2, k), replace=False)] = np.nan
        scores[minus_inf] = -np.inf
        for row in plus_inf:
            scores[row, rng.choice(k, min(2, k), replace=False)] = np.inf
        scores[zeros] = 0.0
        scores[zeros, rng.integers(0, k, zeros.size)] = -0.0
        scores[zeros[:2], 0] = -1.0  # the maximum is then a signed-zero tie
    if dtype == "bfloat16":
        ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 scores need ml_dtypes")
        return scores.astype(ml_dtypes.bfloat16)
    return scores.astype(dtype)


# -- kernel choice -----------------------------------------------------------------------

CHOICE_CASES = [
    pytest.param(2, None, "confusion_binary", None, id="K2-unweighted-binary"),
    pytest.param(5, None, "confusion_shared", 1, id="K5-unweighted-shared-aggregated"),
    pytest.param(50, None, "confusion_shared", 0, id="K50-unweighted-shared"),
    pytest.param(120, None, "confusion_global", None, id="K120-unweighted-global"),
    pytest.param(2, "float64", "confusion_shared", 0, id="K2-weighted-shared"),
    pytest.param(50, "float64", "confusion_shared", 0, id="K50-weighted-shared"),
    pytest.param(80, "float64", "confusion_global", None, id="K80-weighted-global"),
    pytest.param(80, "int64", "confusion_global", None, id="K80-intweighted-global"),
]


@pytest.mark.parametrize("k, weight_dtype, kernel, aggregate", CHOICE_CASES)
def test_kernel_choice(case, emulated_geometry, launches, rng, k, weight_dtype, kernel,
                       aggregate):
    y_true, y_pred = make_labels(rng, 3001, k)
    weights = None if weight_dtype is None else make_weights(rng, 3001, weight_dtype)
    compare_confusion(case, y_true, y_pred, num_classes=k, sample_weight=weights)
    kernels = [launch.kernel for launch in launches]
    assert kernels == [kernel], f"launched {kernels}, expected [{kernel!r}]"
    if aggregate is not None:
        assert int(launches[0].args[-1]) == aggregate, "warp aggregation flag"


def test_kernel_choice_statistics(case, launches, rng):
    y_true, y_pred = make_labels(rng, 2000, HUGE_K)
    compare_statistics(case, y_true, y_pred, num_classes=HUGE_K, moments=True)
    assert [launch.kernel for launch in launches] == ["class_statistics"]


# -- label dtypes --------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 5, 50, 120], ids=lambda k: f"K{k}")
@pytest.mark.parametrize("dtype", LABEL_DTYPES)
def test_label_dtypes(case, rng, dtype, k):
    # N = 3001: not a multiple of any vector width, so the vector loop and the
    # tail both run.
    y_true, y_pred = make_labels(rng, 3001, k, dtype)
    compare_confusion(case, y_true, y_pred, num_classes=k)


@pytest.mark.parametrize("true_dtype, pred_dtype", [
    ("int32", "uint8"), ("bool", "int64"), ("uint64", "int16"),
], ids=lambda d: d)
@pytest.mark.parametrize("k", [2, 5, 120], ids=lambda k: f"K{k}")
def test_mixed_label_dtypes(case, rng, true_dtype, pred_dtype, k):
    y_true, y_pred = make_labels(rng, 3001, k)
    if "bool" in (true_dtype, pred_dtype):
        y_true, y_pred = y_true % 2, y_pred % 2
    compare_confusion(case, y_true.astype(true_dtype), y_pred.astype(pred_dtype), num_classes=k)


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint32", "bool"])
def test_label_dtypes_statistics(case, rng, dtype):
    k = 2 if dtype == "bool" else 100
    y_true, y_pred = make_labels(rng, 3001, k, dtype)
    compare_statistics(case, y_true, y_pred, num_classes=k, moments=True)


# -- weights -------------------------------------------------------------------------------

WEIGHT_DTYPES = ("float32", "float64", "int64", "int32", "bool")


@pytest.mark.parametrize("k", [2, 5, 50, 80], ids=lambda k: f"K{k}")
@pytest.mark.parametrize("weight_dtype", WEIGHT_DTYPES)
def test_weights(case, rng, weight_dtype, k):
    y_true, y_pred = make_labels(rng, 3001, k)
    weights = make_weights(rng, 3001, weight_dtype)
    matrix, _, _ = compare_confusion(case, y_true, y_pred, num_classes=k, sample_weight=weights)
    expected = np.float64 if np.dtype(weight_dtype).kind == "f" else np.int64
    assert matrix.dtype == expected


@pytest.mark.parametrize("weight_dtype", WEIGHT_DTYPES)
def test_weights_statistics(case, rng, weight_dtype):
    k = 300
    y_true, y_pred = make_labels(rng, 3001, k)
    weights = make_weights(rng, 3001, weight_dtype)
    compare_statistics(case, y_true, y_pred, num_classes=k, sample_weight=weights, moments=True,
                       exact_moments=np.dtype(weight_dtype).kind != "f")


@pytest.mark.parametrize("weight_dtype", [None, "int64", "float64", "float32"])
@pytest.mark.parametrize("deterministic", [False, True], ids=["atomic", "deterministic"])
def test_statistics_privatized_in_shared_memory(case, emulated_geometry, launches, rng,
                                                weight_dtype, deterministic):
    """Many samples per class (K = 300, 20,000 samples): the 3K counts of each
    block in shared memory (32-bit cells for counts), flushed at its end; out
    of range and ignored samples still counted apart."""
    k, n = 300, 20_000
    y_true, y_pred = make_labels(rng, n, k)
    y_true[5], y_pred[6], y_true[9] = k + 3, -2, -1
    weights = None if weight_dtype is None else make_weights(rng, n, weight_dtype)
    exact = weights is None or weights.dtype.kind != "f"
    compare_statistics(case, y_true, y_pred, num_classes=k, sample_weight=weights, moments=True,
                       ignore_index=-1, guard=True, deterministic=deterministic,
                       exact_moments=exact)
    (launch,) = [launch for launch in launches if launch.kernel == "class_statistics"]
    assert int(launch.args[-1]) == 1, "privatized"
    assert launch.shared_bytes == 3 * k * (4 if weights is None else 8)


def test_statistics_in_16_bit_shared_fields(case, launches, rng):
    """Unweighted, K = 6,000: 3K 32-bit cells (72 KB) pass the emulated 48 KiB
    budget, 16-bit fields (36 KB) do not. One class takes most samples, so
    its fields wrap 2^16 several times in each block: every wrap adds 2^16 to
    the global count and nothing spills into the neighbouring field."""
    k, n = 6000, 2_000_000
    y_true = np.where(rng.random(n) < 0.9, 1, rng.integers(0, k, n)).astype(np.int32)
    y_pred = np.where(rng.random(n) < 0.8, y_true, rng.integers(0, k, n)).astype(np.int32)
    y_pred[:5] = 0  # class 0 (true positives' field beside class 1's) predicted a few times
    compare_statistics(case, y_true, y_pred, num_classes=k, moments=True)
    (launch,) = [launch for launch in launches if launch.kernel == "class_statistics"]
    mode = int(launch.args[-1])
    if case.device.name == "emulated":
        assert mode == 2 and launch.shared_bytes == 4 * ((3 * k + 1) // 2)
        per_block = n / launch.grid
        assert per_block * 0.9 > 2 * 0x10000, "the busiest field wraps in every block"


def test_dense_matrix_beyond_the_default_shared_budget(case, launches, rng, monkeypatch):
    """K = 150 unweighted (90 KB of counters): in shared memory where the
    device lets a kernel opt in beyond 48 KiB (an H100: 227 KiB), else with
    global atomics; the same counts either way."""
    k = 150
    needed = k * k * 4
    if case.device.name == "emulated":
        monkeypatch.setattr(case.device, "shared_memory_per_block_optin", 227 * 1024)
    y_true, y_pred = make_labels(rng, 3001, k)
    compare_confusion(case, y_true, y_pred, num_classes=k)
    (launch,) = launches
    if case.device.shared_memory_per_block_optin >= needed:
        assert launch.kernel == "confusion_shared" and launch.shared_bytes == needed
    else:
        assert launch.kernel == "confusion_global"


@pytest.mark.parametrize("weight_dtype", [None, "float64"])
@pytest.mark.parametrize("n", [3001, 300], ids=["shared-diagonal", "all-global"])
def test_global_matrix_diagonal_in_shared_memory(case, emulated_geometry, launches, rng, n,
                                                 weight_dtype):
    """Beyond the shared budget, correct predictions go to a per-block shared
    diagonal (when a block has many more samples than classes); the counts
    are the same as with every sample a global atomic."""
    k = 120  # beyond 48 KiB as a matrix of counts (56 KiB) and of doubles
    y_true, y_pred = make_labels(rng, n, k, agree=0.8)
    weights = None if weight_dtype is None else make_weights(rng, n, weight_dtype)
    compare_confusion(case, y_true, y_pred, num_classes=k, sample_weight=weights)
    (launch,) = launches
    assert launch.kernel == "confusion_global"
    cell = 4 if weights is None else 8
    diagonal = n >= launch.grid * k and k * cell <= case.device.shared_memory_per_block_optin
    assert int(launch.args[-1]) == diagonal and launch.shared_bytes == (k * cell if diagonal else 0)
    if case.device.name == "emulated":
        assert diagonal == (n == 3001), "both paths run here"


def zero_weight_data(rng, k, n=600):
    """Class 4 occurs only with weight 0 (once as y_true, once as y_pred); classes
    k-1 and 5 never occur."""
    y_true = rng.choice([0, 1, 2, 3], n)
    y_pred = rng.choice([0, 1, 2, 3], n)
    weights = rng.random(n) + 0.5
    y_true[10], weights[10] = 4, 0.0
    y_pred[20], weights[20] = 4, 0.0
    y_pred[30], weights[30] = k - 2, 0.0
    return y_true, y_pred, weights


@pytest.mark.parametrize("k", [6, 80], ids=lambda k: f"K{k}")
@pytest.mark.parametrize("weight_dtype", ["float64", "float32", "int64"])
def test_zero_weights_are_observed(case, rng, weight_dtype, k):
    y_true, y_pred, weights = zero_weight_data(rng, k)
    weights = weights.astype(weight_dtype) if weight_dtype != "int64" else (
        np.ceil(weights).astype(np.int64))
    _, observed, _ = compare_confusion(case, y_true, y_pred, num_classes=k,
                                       sample_weight=weights)
    assert observed[4] and observed[k - 2], "a class seen only with weight 0 must be observed"
    assert not observed[5] and not observed[k - 1]
    got = compare_statistics(case, y_true, y_pred, num_classes=k, sample_weight=weights,
                             exact_moments=weight_dtype == "int64", moments=True)
    assert got["observed"][4] and not got["observed"][5]


def test_zero_weights_deterministic(case, rng):
    y_true, y_pred, weights = zero_weight_data(rng, 6)
    got = kernel_confusion(case, case.put(y_true), case.put(y_pred), num_classes=6,
                           sample_weight=case.put(weights), deterministic=True)
    assert got[1][4] and not got[1][5]


def test_all_zero_weights(case, rng):
    y_true, y_pred = make_labels(rng, 500, 5)
    weights = np.zeros(500)
    matrix, observed, _ = compare_confusion(case, y_true, y_pred, num_classes=5,
                                            sample_weight=weights)
    assert not matrix.any() and observed.all()
    got = kernel_confusion(case, case.put(y_true), case.put(y_pred), num_classes=5,
                           sample_weight=case.put(weights), deterministic=True)
    assert not got[0].any() and got[1].all()


# -- deterministic=True --------------------------------------------------------------------


def fixed_point_shift(weights, n_total):
    """The kernels' shift s = 62 - e, 2**e = 2**(exponent of max|w|) * 2**(bits of N) > max|w| * N."""
    largest = float(np.max(np.abs(weights.astype(np.float64)), initial=0.0))
    if not largest > 0.0 or n_total <= 0:
        return 0
    return 62 - (math.frexp(largest)[1] + int(n_total).bit_length())


def fixed_point_model(y_true, y_pred, weights, size):
    """What deterministic=True computes, in exact integers: every weight rounded to
    rint(w * scale) (half to even, as llrint), summed exactly, converted once to
    float64 and divided by the power-of-two scale. Also the exact moments."""
    shift = fixed_point_shift(weights, len(weights))
    quantised = [int(q) for q in np.rint(np.ldexp(weights.astype(np.float64), shift))]
    cells = defaultdict(int)
    support, predicted, hits = defaultdict(int), defaultdict(int), defaultdict(int)
    linear = quadratic = 0
    for t, p, q in zip(y_true.tolist(), y_pred.tolist(), quantised):
        cells[t, p] += q
        support[t] += q
        predicted[p] += q
        if t == p:
            hits[t] += q
        linear += q * abs(t - p)
        quadratic += q * (t - p) ** 2

    def to_float(total):
        return math.ldexp(float(total), -shift)

    def dense(table):
        out = np.zeros(size)
        for key, total in table.items():
            out[key] = to_float(total)
        return out

    def moment(total):
        # launchers/confusion.py: (low word as float64 + high word * 2**64) * (1 / scale)
        low, high = total & (2**64 - 1), total >> 64
        return (float(low) + float(high) * 2.0**64) * math.ldexp(1.0, -shift)

    matrix = np.zeros((size, size))
    for key, total in cells.items():
        matrix[key] = to_float(total)
    return dict(matrix=matrix, true_positives=dense(hits), support=dense(support),
                predicted=dense(predicted), linear=moment(linear), quadratic=moment(quadratic))


def documented_bound(weights, counts):
    """accumulate_confusion's docstring: abs error <= max|w| * N * 2**-61 per weight."""
    return float(np.max(np.abs(weights.astype(np.float64)))) * len(weights) * 2.0**-61 * counts


def half_step_bound(weights, counts):
    """The fixed point's bound: half a step, 2**(e - 63), at most max|w| * N * 2**-61
    per weight since 2**e <= 4 max|w| * N (the docstring's figure)."""
    return documented_bound(weights, counts)


def cell_counts(y_true, y_pred, size):
    counts = np.zeros((size, size), dtype=np.int64)
    np.add.at(counts, (y_true, y_pred), 1)
    return counts


@pytest.mark.parametrize("k", [5, 80], ids=lambda k: f"K{k}")
@pytest.mark.parametrize("weight_dtype", ["float32", "float64"])
def test_deterministic_confusion(case, rng, weight_dtype, k):
    n = 3001
    y_true, y_pred = make_labels(rng, n, k)
    weights = (rng.random(n) * 10.0 ** rng.uniform(-3, 3, n)).astype(weight_dtype)
    inputs = case.put(y_true), case.put(y_pred)
    runs = [kernel_confusion(case, *inputs, num_classes=k, sample_weight=case.put(weights),
                             deterministic=True) for _ in range(2)]
    assert runs[0][0].dtype == np.float64
    assert runs[0][0].tobytes() == runs[1][0].tobytes(), "two runs differ"
    # Exactly the documented fixed-point arithmetic, bit for bit.
    model = fixed_point_model(y_true, y_pred, weights, k)["matrix"]
    assert runs[0][0].tobytes() == model.tobytes(), (
        f"differs from the fixed-point model at {np.argwhere(runs[0][0] != model)[:4].tolist()}")
    # Close to NumPy's float64 sums: half a fixed-point step per weight, plus the
    # float64 rounding of NumPy's own sums (rtol 1e-12).
    reference, observed, invalid = reference_confusion(y_true, y_pred, num_classes=k,
                                                       sample_weight=weights)
    error = np.abs(runs[0][0] - reference)
    tolerance = half_step_bound(weights, cell_counts(y_true, y_pred, k)) + RTOL * reference
    assert (error <= tolerance).all(), f"max excess {np.max(error - tolerance)}"
    assert np.array_equal(runs[0][1], observed) and runs[0][2] == invalid


@pytest.mark.parametrize("weight_dtype", ["float32", "float64"])
def test_deterministic_statistics(case, rng, weight_dtype):
    n, k = 3001, 1000
    y_true, y_pred = make_labels(rng, n, k)
    weights = (rng.random(n) * 3.0).astype(weight_dtype)
    inputs = case.put(y_true), case.put(y_pred)
    runs = [kernel_statistics(case, *inputs, num_classes=k, sample_weight=case.put(weights),
                              moments=True, deterministic=True) for _ in range(2)]
    for name in STATISTICS_FIELDS:
        if name != "invalid":
            assert np.asarray(runs[0][name]).tobytes() == np.asarray(runs[1][name]).tobytes(), name
    model = fixed_point_model(y_true, y_pred, weights, k)
    for name in ("true_positives", "support", "predicted"):
        assert runs[0][name].tobytes() == model[name].tobytes(), name
    assert float(runs[0]["linear_disagreement"]) == model["linear"]
    assert float(runs[0]["quadratic_disagreement"]) == model["quadratic"]
    reference = reference_statistics(y_true, y_pred, num_classes=k, sample_weight=weights,
                                     moments=True)
    bound = half_step_bound(weights, 1)
    for name in ("true_positives", "support", "predicted"):
        counts = {"true_positives": np.bincount(y_true[y_true == y_pred], minlength=k),
                  "support": np.bincount(y_true, minlength=k),
                  "predicted": np.bincount(y_pred, minlength=k)}[name]
        error = np.abs(runs[0][name] - reference[name])
        assert (error <= bound * counts + RTOL * reference[name]).all(), name
    gaps = np.abs(y_true - y_pred)
    for name, power in (("linear_disagreement", 1), ("quadratic_disagreement", 2)):
        expected = float(reference[name])
        tolerance = bound * float(np.sum(gaps.astype(np.float64) ** power)) + RTOL * expected
        assert abs(float(runs[0][name]) - expected) <= tolerance, name


def test_deterministic_error_within_half_step(case):
    """The true bound of the fixed point: half a step, 2**(e-63) <= max|w|*N*2**-62."""
    x = 2.0**-60 * (1 + 2.0**-40)  # x * scale = 0.5 + tiny: rounds up by almost half a step
    y = np.array([0, 1, 1, 1])
    weights = np.array([1.0, x, x, x])
    matrix, _, _ = kernel_confusion(case, case.put(y), case.put(y), num_classes=2,
                                    sample_weight=case.put(weights), deterministic=True)
    assert abs(matrix[1, 1] - 3 * x) <= 3 * 1.0 * 4 * 2.0**-61


def test_deterministic_documented_error_bound(case):
    x = 2.0**-60 * (1 + 2.0**-40)
    y = np.array([0, 1, 1, 1])
    weights = np.array([1.0, x, x, x])
    matrix, _, _ = kernel_confusion(case, case.put(y), case.put(y), num_classes=2,
                                    sample_weight=case.put(weights), deterministic=True)
    assert abs(matrix[1, 1] - 3 * x) <= documented_bound(weights, 3)


def test_deterministic_tiny_weights(case):
    y = np.zeros(10, dtype=np.int64)
    weights = np.full(10, 1e-300)
    matrix, _, _ = kernel_confusion(case, case.put(y), case.put(y), num_classes=3,
                                    sample_weight=case.put(weights), deterministic=True)
    assert matrix[0, 0] == pytest.approx(1e-299, rel=1e-12, abs=0)


def test_deterministic_huge_weights(case):
    y = np.arange(20) % 5
    weights = np.full(20, 1e307)
    matrix, _, _ = kernel_confusion(case, case.put(y), case.put(y), num_classes=5,
                                    sample_weight=case.put(weights), deterministic=True)
    np.testing.assert_allclose(np.diag(matrix), np.full(5, 4e307), rtol=1e-12)


# -- huge K: per-class statistics ---------------------------------------------------------


def huge_k_data(rng, n=3000, dtype="int64"):
    """Codes over the whole [0, HUGE_K) range (K - 1 included): large gaps."""
    y_true = rng.integers(0, HUGE_K, n)
    y_true[:3] = [0, HUGE_K - 1, HUGE_K // 2]
    y_pred = np.where(rng.random(n) < 0.4, y_true, rng.integers(0, HUGE_K, n))
    y_pred[:3] = [HUGE_K - 1, 0, HUGE_K // 2]
    return y_true.astype(dtype), y_pred.astype(dtype)


@pytest.mark.parametrize("weight_dtype", [None, "int64", "float64", "float32"],
                         ids=lambda d: f"weights-{d}")
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint32"])
def test_huge_k_statistics(case, rng, dtype, weight_dtype):
    y_true, y_pred = huge_k_data(rng, dtype=dtype)
    weights = None if weight_dtype is None else make_weights(rng, y_true.size, weight_dtype)
    got = compare_statistics(case, y_true, y_pred, num_classes=HUGE_K, sample_weight=weights,
                             moments=True, exact_moments=weight_dtype in (None, "int64"))
    assert got["support"].shape == (HUGE_K,)
    assert float(got["quadratic_disagreement"]) > 2.0**53 / 1e4  # large gaps did occur


@pytest.mark.parametrize("weight_dtype", [None, "float64"], ids=lambda d: f"weights-{d}")
def test_huge_k_statistics_class_lut(case, rng, weight_dtype):
    codes = np.sort(rng.choice(HUGE_K, 2000, replace=False))
    y_true = codes[rng.integers(0, codes.size, 3000)]
    y_pred = np.where(rng.random(3000) < 0.5, y_true, codes[rng.integers(0, codes.size, 3000)])
    selected = rng.choice(codes, 1200, replace=False)
    lut = np.full(HUGE_K, -1, dtype=np.int64)
    lut[selected] = rng.permutation(selected.size)
    weights = None if weight_dtype is None else make_weights(rng, 3000, weight_dtype)
    got = compare_statistics(case, y_true, y_pred, num_classes=HUGE_K, class_lut=lut,
                             sample_weight=weights, moments=True,
                             exact_moments=weight_dtype is None)
    assert got["support"].shape == (selected.size,)


def test_huge_k_statistics_guard_and_ignore(case, rng, guarded):
    y_true, y_pred = huge_k_data(rng)
    y_true[10:20] = [HUGE_K, HUGE_K + 5, -1, 2**40, -(2**40), -100, -100, 7, 7, 7]
    y_pred[20:25] = [HUGE_K, -1, 2**62, -(2**62), HUGE_K * 3]
    compare_statistics(case, y_true, y_pred, num_classes=HUGE_K, moments=True, guard=True,
                       ignore_index=-100)
    guarded.check()


@pytest.mark.parametrize("k", [7, 1000], ids=lambda k: f"K{k}")
def test_statistics_fused_argmax(case, rng, k):
    n = 400 if k == 1000 else 2000
    scores = make_scores(rng, n, k, "float32")
    y_true = rng.integers(0, k, n)
    compare_statistics(case, y_true, scores, scores=True, num_classes=k, moments=True)


# -- fused argmax --------------------------------------------------------------------------

SCORE_DTYPES = ("float32", "float64", "float16", "bfloat16")


def score_rows(k):
    """Rows per fused-argmax test: with 32 lanes per row (K > 16) a warp takes one row
    per step, which the emulator runs slowly."""
    return 2000 if k <= 8 else 400


def skip_unsupported_scores(case, dtype):
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 scores need ml_dtypes")
        if case.name == "cuda":
            pytest.skip("CuPy has no bfloat16 dtype (torch bfloat16 is widened on the host side)")


@pytest.mark.parametrize("k", [2, 7, 33, 1000], ids=lambda k: f"K{k}")
@pytest.mark.parametrize("dtype", SCORE_DTYPES)
def test_fused_argmax(case, rng, dtype, k):
    skip_unsupported_scores(case, dtype)
    n = score_rows(k)
    scores = make_scores(rng, n, k, dtype)
    y_true = rng.integers(0, k, n)
    compare_confusion(case, y_true, scores, scores=True, num_classes=k)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_fused_argmax_identifies_every_row(case, rng, dtype):
    """y_true = row number: the matrix row of each sample is its argmax one-hot."""
    k = 300
    scores = make_scores(rng, k, k, dtype)
    y_true = np.arange(k)
    matrix, _, _ = compare_confusion(case, y_true, scores, scores=True, num_classes=k)
    expected = reference_labels(scores, True)
    assert np.array_equal(np.argmax(matrix, axis=1), expected)


# K = 7: the shared-memory matrix; K = 100: 100 x 100 double cells pass the
# shared budget, so the fused argmax feeds confusion_global.
@pytest.mark.parametrize("k", [7, 100], ids=lambda k: f"K{k}")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_argmax_weighted(case, rng, dtype, k):
    n = 2000 if k < 100 else 300
    scores = make_scores(rng, n, k, dtype)
    y_true = rng.integers(0, k, n)
    weights = make_weights(rng, n, "float64")
    compare_confusion(case, y_true, scores, scores=True, num_classes=k, sample_weight=weights)
    compare_confusion(case, y_true, scores, scores=True, num_classes=k,
                      sample_weight=weights.astype(np.int64))


@pytest.mark.parametrize("k", [2, 7], ids=lambda k: f"K{k}")
def test_fused_argmax_float16_subnormals(case, rng, k):
    """Half-precision subnormals widen exactly: 2**-24 multiples order correctly."""
    n = 1000
    scores = (rng.integers(0, 5, (n, k)) * 2.0**-24).astype(np.float16)
    scores[::7] = -scores[::7]
    y_true = rng.integers(0, k, n)
    compare_confusion(case, y_true, scores, scores=True, num_classes=k)


SCORE_VIEWS = {
    "transposed": lambda xp, s, k: xp.ascontiguousarray(s.T).T,
    "column-slice": lambda xp, s, k: xp.concatenate([s[:, :1], s, s[:, :2]], axis=1)[:, 1:1 + k],
    "column-step-2": lambda xp, s, k: xp.repeat(s, 2, axis=1)[:, ::2],
    "negative-row-stride": lambda xp, s, k: xp.ascontiguousarray(s[::-1])[::-1],
    "row-step-2": lambda xp, s, k: xp.repeat(s, 2, axis=0)[::2],
}


@pytest.mark.parametrize("k", [2, 7, 33], ids=lambda k: f"K{k}")
@pytest.mark.parametrize("view", list(SCORE_VIEWS))
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_fused_argmax_strided_scores(case, rng, dtype, view, k):
    """A strided view of the scores gives what its contiguous copy gives."""
    n = score_rows(k) // 2
    scores = make_scores(rng, n, k, dtype)
    y_true = rng.integers(0, k, n)
    xp = case.device.xp
    device_view = SCORE_VIEWS[view](xp, case.put(scores), k)
    host_view = SCORE_VIEWS[view](np, scores, k)
    assert np.array_equal(case.get(device_view), scores, equal_nan=True)
    assert not host_view.flags.c_contiguous
    got = kernel_confusion(case, case.put(y_true), device_view, scores=True, num_classes=k)
    contiguous = kernel_confusion(case, case.put(y_true), xp.ascontiguousarray(device_view),
                                  scores=True, num_classes=k)
    assert_same_confusion(got, contiguous)
    assert_same_confusion(got, reference_confusion(y_true, scores, scores=True, num_classes=k))


def test_fused_argmax_reversed_rows(case, rng):
    """scores[::-1] (negative row stride) against NumPy on the reversed rows."""
    k, n = 7, 1000
    scores = make_scores(rng, n, k, "float32")
    y_true = rng.integers(0, k, n)
    got = kernel_confusion(case, case.put(y_true), case.put(scores)[::-1], scores=True,
                           num_classes=k)
    assert_same_confusion(got, reference_confusion(y_true, scores[::-1], scores=True,
                                                   num_classes=k))


@pytest.mark.parametrize("k", [2, 7], ids=lambda k: f"K{k}")
def test_fused_argmax_ignore_and_guard(case, rng, guarded, k):
    n = 1000
    scores = make_scores(rng, n, k, "float32")
    y_true = rng.integers(0, k, n)
    y_true[:30] = -100
    y_true[30:40] = k
    y_true[40:45] = -1
    compare_confusion(case, y_true, scores, scores=True, num_classes=k, ignore_index=-100,
                      guard=True)
    guarded.check()


# -- non-contiguous labels and weights -----------------------------------------------------

LABEL_VIEWS = {
    "step-2": lambda a: a[::2],
    "step-3": lambda a: a[::3],
    "reversed": lambda a: a[::-1],
}


@pytest.mark.parametrize("k", [2, 5, 120], ids=lambda k: f"K{k}")
@pytest.mark.parametrize("view", list(LABEL_VIEWS))
@pytest.mark.parametrize("dtype", ["int8", "int64"])
def test_strided_labels(case, rng, dtype, view, k):
    y_true, y_pred = make_labels(rng, 6003, k, dtype)
    weights = make_weights(rng, 6003, "float64")
    apply = LABEL_VIEWS[view]
    host = [apply(a) for a in (y_true, y_pred, weights)]
    device = [apply(case.put(a)) for a in (y_true, y_pred, weights)]
    got = kernel_confusion(case, device[0], device[1], num_classes=k)
    assert_same_confusion(got, reference_confusion(host[0], host[1], num_classes=k))
    got = kernel_confusion(case, device[0], case.put(host[1]), num_classes=k,
                           sample_weight=device[2])
    assert_same_confusion(got, reference_confusion(host[0], host[1], num_classes=k,
                                                   sample_weight=host[2]))


# -- out-of-range labels (guard) -----------------------------------------------------------


def out_of_range_values(dtype, k):
    info = np.iinfo(dtype)
    values = [k, k + 1, info.max, -1, -(2**40), 2**40, 2**62, -(2**62), 2**63, 2**64 - 1,
              info.min, k + 1000, 2**31, 2**32 + 1]
    return [v for v in values if info.min <= v <= info.max and not 0 <= v < k]


GUARD_DTYPES = ("int8", "uint8", "int16", "int32", "uint32", "int64", "uint64")
GUARD_PATHS = [
    pytest.param(2, None, id="K2-binary"),
    pytest.param(5, None, id="K5-shared-aggregated"),
    pytest.param(50, None, id="K50-shared"),
    pytest.param(120, None, id="K120-global"),
    pytest.param(5, "float64", id="K5-weighted-shared"),
    pytest.param(80, "float64", id="K80-weighted-global"),
    pytest.param(80, "int64", id="K80-intweighted-global"),
]


@pytest.mark.parametrize("k, weight_dtype", GUARD_PATHS)
@pytest.mark.parametrize("dtype", GUARD_DTYPES)
def test_out_of_range_labels(case, rng, guarded, dtype, k, weight_dtype):
    bad = out_of_range_values(dtype, k)
    if not bad:
        pytest.skip(f"every {dtype} value is a valid code for K={k}")
    n = 2000
    y_true, y_pred = make_labels(rng, n, k, dtype)
    where_true = rng.choice(n, 60, replace=False)
    where_pred = rng.choice(n, 60, replace=False)
    y_true[where_true] = np.array(bad, dtype=object)[rng.integers(0, len(bad), 60)].astype(dtype)
    y_pred[where_pred] = np.array(bad, dtype=object)[rng.integers(0, len(bad), 60)].astype(dtype)
    before = (y_true.copy(), y_pred.copy())
    weights = None if weight_dtype is None else make_weights(rng, n, weight_dtype)
    _, _, invalid = compare_confusion(case, y_true, y_pred, num_classes=k,
                                      sample_weight=weights, guard=True)
    assert invalid == np.union1d(where_true, where_pred).size
    guarded.check()
    assert np.array_equal(before[0], y_true) and np.array_equal(before[1], y_pred)


@pytest.mark.parametrize("dtype", ["int64", "uint64"])
def test_out_of_range_labels_statistics(case, rng, guarded, dtype):
    k = 300
    bad = out_of_range_values(dtype, k)
    y_true, y_pred = make_labels(rng, 2000, k, dtype)
    y_true[:len(bad)] = np.array(bad, dtype=object).astype(dtype)
    y_pred[100:100 + len(bad)] = np.array(bad, dtype=object).astype(dtype)
    compare_statistics(case, y_true, y_pred, num_classes=k, guard=True, moments=True)
    guarded.check()


def test_out_of_range_with_class_lut(case, rng, guarded):
    """The range check comes before the lookup table: a code K is invalid, not looked up."""
    k = 10
    lut = np.array([-1, 0, -1, 1, 2, -1, -1, 3, -1, 4], dtype=np.int64)
    y_true, y_pred = make_labels(rng, 2000, k)
    y_true[:20] = k
    y_pred[20:40] = -1
    y_pred[40:50] = k + 7
    compare_confusion(case, y_true, y_pred, num_classes=k, class_lut=lut, guard=True)
    compare_statistics(case, y_true, y_pred, num_classes=k, class_lut=lut, guard=True,
                       moments=True)
    guarded.check()


# -- ignore_index ------------------------------------------------------------------------

IGNORE_CASES = [
    pytest.param("int64", -100, id="int64-ignore-minus100"),
    pytest.param("int64", 3, id="int64-ignore-in-range"),
    pytest.param("int64", 10**6, id="int64-ignore-large"),
    pytest.param("int8", -1, id="int8-ignore-minus1"),
    pytest.param("uint8", 255, id="uint8-ignore-255"),
    pytest.param("int32", -100, id="int32-ignore-minus100"),
    pytest.param("uint64", 2**40, id="uint64-ignore-2pow40"),
]


@pytest.mark.parametrize("k, weight_dtype", GUARD_PATHS[:4] + GUARD_PATHS[5:6])
@pytest.mark.parametrize("dtype, ignore_index", IGNORE_CASES)
def test_ignore_index(case, rng, guarded, dtype, ignore_index, k, weight_dtype):
    n = 2000
    y_true, y_pred = make_labels(rng, n, k, "int64")
    ignored = rng.random(n) < 0.2
    y_true[ignored] = ignore_index
    # y_pred equal to ignore_index is not ignored (only targets are): counted or invalid.
    y_pred[rng.random(n) < 0.05] = ignore_index
    y_true, y_pred = y_true.astype(dtype), y_pred.astype(dtype)
    weights = None if weight_dtype is None else make_weights(rng, n, weight_dtype)
    _, _, invalid = compare_confusion(case, y_true, y_pred, num_classes=k,
                                      sample_weight=weights, ignore_index=ignore_index,
                                      guard=True)
    if not 0 <= ignore_index < k:
        # dropped, not counted invalid: only the ignore_index predictions of kept samples
        assert invalid == np.count_nonzero(~ignored & (y_pred.astype(np.int64) == ignore_index))
    compare_statistics(case, y_true, y_pred, num_classes=k, sample_weight=weights,
                       ignore_index=ignore_index, guard=True, moments=True,
                       exact_moments=weight_dtype is None)
    guarded.check()


@pytest.mark.parametrize("pred, ignore_index", [
    pytest.param("uint64", -100, id="same-dtype-minus100"),
    pytest.param("uint64", -1, id="same-dtype-minus1"),
    pytest.param("uint64", 2**64 - 100, id="same-dtype-2pow64-100"),
    pytest.param("int16", -100, id="mixed-minus100"),
    pytest.param("int16", 2**64 - 100, id="mixed-2pow64-100"),
    pytest.param("scores", -100, id="scores-minus100"),
])
def test_ignore_index_uint64_wraparound(case, pred, ignore_index):
    """uint64 labels >= 2**63 are compared with ignore_index by value, as NumPy does."""
    y_true = np.array([0, 1, 2**64 - 100, 2**64 - 1, 3, 2], dtype=np.uint64)
    if pred == "scores":
        y_pred = np.eye(4, dtype=np.float32)[[0, 1, 1, 1, 2, 2]]
        compare_confusion(case, y_true, y_pred, scores=True, num_classes=4,
                          ignore_index=ignore_index, guard=True)
    else:
        y_pred = np.array([0, 1, 1, 1, 2, 2], dtype=pred)
        compare_confusion(case, y_true, y_pred, num_classes=4, ignore_index=ignore_index,
                          guard=True)


# -- class_lut (dense) -----------------------------------------------------------------------


@pytest.mark.parametrize("k, selected, weight_dtype", [
    pytest.param(10, [7, 2, 5], None, id="K10-select3-shared-aggregated"),
    pytest.param(3, [2, 0], None, id="K3-select2-binary"),
    pytest.param(3, [2, 0], "float64", id="K3-select2-weighted"),
    pytest.param(40, list(range(39, -1, -2)), None, id="K40-select20-shared"),
    pytest.param(200, list(range(0, 200, 3))[::-1] + list(range(1, 200, 3)), None,
                 id="K200-select134-global"),
    pytest.param(200, list(range(0, 200, 2)), "float32", id="K200-select100-weighted-global"),
])
def test_class_lut_dense(case, emulated_geometry, rng, launches, k, selected, weight_dtype):
    lut = np.full(k, -1, dtype=np.int64)
    lut[selected] = np.arange(len(selected))
    y_true, y_pred = make_labels(rng, 3001, k)
    weights = None if weight_dtype is None else make_weights(rng, 3001, weight_dtype)
    matrix, _, _ = compare_confusion(case, y_true, y_pred, num_classes=k, class_lut=lut,
                                     sample_weight=weights)
    assert matrix.shape == (len(selected), len(selected))
    size = len(selected)
    cell = 4 if weights is None else 8
    if size == 2 and weights is None:
        expected = "confusion_binary"
    elif size * size * cell <= case.device.shared_memory_per_block:
        expected = "confusion_shared"
    else:
        expected = "confusion_global"
    assert [launch.kernel for launch in launches] == [expected]


def test_class_lut_with_fused_argmax(case, rng):
    k = 9
    lut = np.array([3, -1, 0, -1, 1, 2, -1, -1, 4], dtype=np.int64)
    scores = make_scores(rng, 1500, k, "float32")
    y_true = rng.integers(0, k, 1500)
    compare_confusion(case, y_true, scores, scores=True, num_classes=k, class_lut=lut)


# -- empty input ---------------------------------------------------------------------------


@pytest.mark.parametrize("k, weight_dtype, deterministic", [
    pytest.param(2, None, False, id="K2-binary"),
    pytest.param(5, None, False, id="K5-shared"),
    pytest.param(120, None, False, id="K120-global"),
    pytest.param(5, "float64", False, id="K5-weighted"),
    pytest.param(80, "int64", False, id="K80-intweighted"),
    pytest.param(5, "float32", True, id="K5-deterministic"),
])
def test_empty_input(case, k, weight_dtype, deterministic):
    y = np.zeros(0, dtype=np.int64)
    weights = None if weight_dtype is None else np.zeros(0, dtype=weight_dtype)
    matrix, observed, invalid = compare_confusion(case, y, y, num_classes=k,
                                                  sample_weight=weights,
                                                  deterministic=deterministic)
    assert not matrix.any() and not observed.any() and invalid == 0
    got = compare_statistics(case, y, y, num_classes=k, sample_weight=weights, moments=True,
                             deterministic=deterministic)
    assert float(got["total"]) == 0 and float(got["linear_disagreement"]) == 0


@pytest.mark.parametrize("k", [2, 7], ids=lambda k: f"K{k}")
def test_empty_scores(case, k):
    scores = np.zeros((0, k), dtype=np.float32)
    y = np.zeros(0, dtype=np.int64)
    matrix, observed, invalid = compare_confusion(case, y, scores, scores=True, num_classes=k)
    assert not matrix.any() and not observed.any() and invalid == 0


# -- grid-stride loop, vector loads and the tail -------------------------------------------


def vector_width(dtype):
    return 16 // np.dtype(dtype).itemsize


def grid_threads(case):
    from metrics_gpu.backends.launchers import base

    return (case.device.multiprocessor_count * base.BLOCKS_PER_MULTIPROCESSOR
            * case.device.block_threads)


@pytest.mark.parametrize("weight_dtype", [None, "float64"], ids=lambda d: f"weights-{d}")
@pytest.mark.parametrize("dtype", ["int8", "int64"])
def test_grid_stride_loop(case, rng, launches, dtype, weight_dtype):
    """More vectors than threads in the grid: every thread takes several steps."""
    n = max(20_011, 2 * grid_threads(case) * vector_width(dtype) + 11)
    y_true, y_pred = make_labels(rng, n, 3, dtype)
    weights = None if weight_dtype is None else make_weights(rng, n, weight_dtype)
    compare_confusion(case, y_true, y_pred, num_classes=3, sample_weight=weights)
    (launch,) = launches
    assert int(launch.args[9]) == 1, "fresh arrays are 16-byte aligned: vector loads expected"
    assert launch.grid * launch.block * vector_width(dtype) < n, "the loop must iterate"
    compare_statistics(case, y_true, y_pred, num_classes=3, sample_weight=weights, moments=True,
                       exact_moments=weight_dtype is None)


def test_grid_stride_loop_scores(case, rng, launches):
    k = 3
    n = max(20_011, 2 * grid_threads(case) // 4 + 11)  # group of 4 lanes per row
    scores = make_scores(rng, n, k, "float32")
    y_true = rng.integers(0, k, n)
    compare_confusion(case, y_true, scores, scores=True, num_classes=k)
    (launch,) = launches
    assert launch.grid * launch.block // int(launch.args[12]) < n, "the loop must iterate"


@pytest.mark.parametrize("k", [2, 5, 120], ids=lambda k: f"K{k}")
@pytest.mark.parametrize("dtype", ["int8", "int16", "int64", "bool"])
@pytest.mark.parametrize("offset_pred", [True, False], ids=["both-offset", "true-offset"])
def test_unaligned_labels_tail_path(case, rng, launches, dtype, offset_pred, k):
    """y_true[1:] is not 16-byte aligned: vector_loads = 0, every sample takes the tail."""
    n = 3001
    base_true, base_pred = make_labels(rng, n + 1, k, dtype)
    y_true = case.put(base_true)[1:]
    y_pred = case.put(base_pred)[1:] if offset_pred else case.put(base_pred[1:].copy())
    got = kernel_confusion(case, y_true, y_pred, num_classes=k)
    assert_same_confusion(got, reference_confusion(base_true[1:], base_pred[1:], num_classes=k))
    assert [int(launch.args[9]) for launch in launches] == [0] * len(launches)


# -- public API on the emulated backend ----------------------------------------------------


def _same_report(report, reference):
    assert report.metrics.keys() == reference.metrics.keys()
    for name, value in report.metrics.items():
        assert value == pytest.approx(reference.metrics[name], rel=1e-10, abs=1e-14,
                                      nan_ok=True), name
    assert np.array_equal(report.classes, reference.classes)
    for name, values in report.per_class.items():
        np.testing.assert_allclose(values, reference.per_class[name], rtol=1e-10, atol=1e-14,
                                   err_msg=name)
    assert report.total == pytest.approx(reference.total, rel=1e-12, abs=0)
    assert report.invalid == reference.invalid
    if reference.confusion_matrix is None:
        assert report.confusion_matrix is None
    else:
        assert_counts(np.asarray(report.confusion_matrix), reference.confusion_matrix,
                      "report matrix")


PUBLIC_CASES = {
    "labels-K5": dict(k=5, n=3000),
    "labels-K120-weighted": dict(k=120, n=3000, weights="float64"),
    "labels-K2-int-weights": dict(k=2, n=3000, weights="int64"),
    "scores-K7": dict(k=7, n=2000, scores=True),
    "sparse-codes-statistics": dict(k=300_000, n=3000, sparse=True),
    "huge-K-given": dict(k=300_000, n=3000, given=True),
    "unvalidated-out-of-range": dict(k=6, n=2000, invalid=True),
}


@pytest.mark.parametrize("name", list(PUBLIC_CASES))
def test_public_api_matches_numpy(case, rng, name):
    spec = PUBLIC_CASES[name]
    k, n = spec["k"], spec["n"]
    kwargs = {}
    if spec.get("sparse"):
        codes = rng.choice(k, 500, replace=False)
        y_true = codes[rng.integers(0, 500, n)]
        y_pred = np.where(rng.random(n) < 0.5, y_true, codes[rng.integers(0, 500, n)])
    else:
        y_true, y_pred = make_labels(rng, n, k)
    if spec.get("scores"):
        y_pred = make_scores(rng, n, k, "float32", special_rows=False)
    if spec.get("given"):
        kwargs["num_classes"] = k
    if spec.get("invalid"):
        y_true[:7] = k + 3
        y_pred[7:9] = -1
        kwargs.update(num_classes=k, validate=False)
    weights = None if "weights" not in spec else make_weights(rng, n, spec["weights"])
    with metrics_gpu.use_backend("numpy"):
        reference = metrics_gpu.label_report(y_true, y_pred, sample_weight=weights, **kwargs)
        dense = not spec.get("given")  # confusion_matrix refuses 300,000 x 300,000
        reference_matrix = metrics_gpu.confusion_matrix(
            y_true, y_pred, sample_weight=weights, **kwargs) if dense else None
    with metrics_gpu.use_backend(case.name):
        report = metrics_gpu.label_report(case.put(y_true), case.put(y_pred),
                                          sample_weight=case.put(weights), **kwargs)
        matrix = case.get(metrics_gpu.confusion_matrix(
            case.put(y_true), case.put(y_pred), sample_weight=case.put(weights),
            **kwargs)) if dense else None
    _same_report(report, reference)
    if dense:
        assert_counts(matrix, reference_matrix, "confusion_matrix")


def test_public_confusion_matrix_labels(case, rng):
    y_true, y_pred = make_labels(rng, 3000, 12)
    labels = np.array([11, 3, 0, 7])
    weights = make_weights(rng, 3000, "float32")
    for w in (None, weights):
        with metrics_gpu.use_backend("numpy"):
            reference = metrics_gpu.confusion_matrix(y_true, y_pred, labels=labels,
                                                     sample_weight=w)
        with metrics_gpu.use_backend(case.name):
            got = case.get(metrics_gpu.confusion_matrix(case.put(y_true), case.put(y_pred),
                                                        labels=labels, sample_weight=case.put(w)))
        assert_counts(got, reference, "confusion_matrix(labels=...)")
