"""Record-time errors: each is a ``fj.FusejitError`` subclass whose message names the shapes/axes/dtypes."""
# ruff: noqa: E501  (one error case per line reads best)

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

import fusejit as fj

X = fj.asarray(np.ones((2, 3), np.float32))
INTS = fj.asarray(np.ones((2, 3), np.int32))


def test_hierarchy() -> None:
    for cls in (fj.ShapeError, fj.AxisError, fj.DTypeError, fj.BackendError, fj.InputError,
                fj.IRError, fj.IndexingError, fj.BackendUnavailableError, fj.DeviceError,
                fj.DeviceMemoryError):
        assert issubclass(cls, fj.FusejitError)
    assert issubclass(fj.BackendUnavailableError, fj.BackendError)
    assert issubclass(fj.DeviceMemoryError, MemoryError)
    assert issubclass(fj.ShapeError, ValueError) and issubclass(fj.AxisError, ValueError)
    assert issubclass(fj.DTypeError, TypeError) and issubclass(fj.IndexingError, IndexError)


@pytest.mark.parametrize("make, exc, message", [
    # broadcasting
    (lambda: X + fj.ones(4), fj.ShapeError,
     "shapes (2, 3) and (4,) cannot be broadcast together (axis -1: 3 vs 4)"),
    (lambda: fj.maximum(X, fj.ones((5, 1, 2))), fj.ShapeError, "shapes (2, 3) and (5, 1, 2)"),
    (lambda: fj.where(X > 0, X, fj.ones(4)), fj.ShapeError, "cannot be broadcast together"),
    (lambda: fj.broadcast_to(X, (3,)), fj.ShapeError, "cannot broadcast shape (2, 3) to (3,)"),
    (lambda: fj.broadcast_to(X, (4, 3)), fj.ShapeError, "shapes (2, 3) and (4, 3) cannot be broadcast"),
    # axes
    (lambda: X.sum(axis=2), fj.AxisError, "axis 2 is out of bounds for a tensor of 2 dimensions"),
    (lambda: fj.mean(X, axis=-3), fj.AxisError, "axis -3 is out of bounds for a tensor of 2 dimensions"),
    (lambda: X.max(axis=(0, -2)), fj.AxisError, "repeated axis in (0, -2)"),
    (lambda: fj.argmax(X, axis=(0, 1)), fj.AxisError, "axis must be an integer, got (0, 1)"),
    (lambda: fj.softmax(X, axis=3), fj.AxisError, "axis 3 is out of bounds"),
    (lambda: fj.transpose(X, (0, 0)), fj.AxisError, "axes (0, 0) are not a permutation of the 2 axes of (2, 3)"),
    (lambda: fj.expand_dims(X, 5), fj.AxisError, "axis 5 is out of bounds for a tensor of 3 dimensions"),
    (lambda: fj.squeeze(X, 0), fj.ShapeError, "cannot squeeze axis 0 of shape (2, 3): its size is 2, not 1"),
    # reshape
    (lambda: X.reshape(4, 2), fj.ShapeError, "cannot reshape tensor of size 6 (shape (2, 3)) into shape (4, 2)"),
    (lambda: X.reshape(-1, -1), fj.ShapeError, "only one dimension can be -1, got (-1, -1)"),
    (lambda: X.reshape(4, -1), fj.ShapeError, "cannot reshape tensor of size 6 into shape (4, -1)"),
    (lambda: fj.full((-1,), 1), fj.ShapeError, "negative dimensions are not allowed in shape (-1,)"),
    # dtypes: bitwise ops on floats
    (lambda: X & 1, fj.DTypeError, "bitwise_and: not supported for dtypes (float32, int)"),
    (lambda: fj.bitwise_or(X, INTS), fj.DTypeError, "bitwise_or: not supported for dtypes (float32, int32)"),
    (lambda: fj.bitwise_xor(INTS, 1.5), fj.DTypeError, "bitwise_xor: not supported for dtypes (int32, float)"),
    (lambda: ~X, fj.DTypeError, "invert: not supported for dtypes (float32)"),
    (lambda: fj.bitwise_not(X), fj.DTypeError, "invert: not supported for dtypes (float32)"),
    (lambda: X << 1, fj.DTypeError, "left_shift: not supported for dtypes (float32, int)"),
    (lambda: fj.right_shift(INTS, X), fj.DTypeError, "right_shift: not supported for dtypes (int32, float32)"),
    (lambda: -fj.asarray([True]), fj.DTypeError, "negative: not supported for dtypes (bool)"),
    (lambda: fj.reciprocal(INTS), fj.DTypeError, "reciprocal: integer reciprocal"),
    (lambda: fj.asarray(np.int8([1])) + 300, fj.DTypeError, "add: Python integer 300 is out of bounds for int8"),
    # unsupported dtypes
    (lambda: fj.asarray(np.array([1j])), fj.DTypeError, "asarray: dtype complex128 is not supported"),
    (lambda: fj.asarray(np.array(["a"])), fj.DTypeError, "asarray: dtype <U1 is not supported"),
    (lambda: fj.asarray(np.array([b"a"])), fj.DTypeError, "asarray: dtype |S1 is not supported"),
    (lambda: fj.asarray(np.array([object()])), fj.DTypeError, "asarray: dtype object is not supported"),
    (lambda: fj.asarray(np.zeros(2, "datetime64[s]")), fj.DTypeError, "datetime64[s] is not supported"),
    (lambda: X.astype(complex), fj.DTypeError, "astype: dtype complex128 is not supported"),
    (lambda: fj.zeros(3, dtype="U3"), fj.DTypeError, "full: dtype <U3 is not supported"),
    (lambda: fj.asarray([1], dtype="complex64"), fj.DTypeError, "dtype complex64 is not supported"),
    (lambda: X.astype("not a dtype"), fj.DTypeError, "astype: 'not a dtype' is not a dtype"),
    (lambda: X + 1j, fj.DTypeError, "asarray: dtype complex128 is not supported"),
    (lambda: X + "a", fj.DTypeError, "dtype <U1 is not supported"),
    # indexing and empty reductions
    (lambda: X[5], fj.IndexingError, "index 5 is out of bounds for axis 0 with size 2"),
    (lambda: X[:, -4], fj.IndexingError, "index -4 is out of bounds for axis 1 with size 3"),
    (lambda: X[0, 0, 0], fj.IndexingError, "too many indices for a tensor of shape (2, 3): 3 were indexed"),
    (lambda: X[[0, 1]], fj.IndexingError, "advanced (array) indexing is not supported"),
    (lambda: X[..., ...], fj.IndexingError, "an index can only have a single ellipsis"),
    (lambda: X[::0], fj.IndexingError, "bad slice"),
    (lambda: fj.max(fj.zeros((0,))), fj.ShapeError, "max: zero-size reduction over axes (0,) of shape (0,)"),
    (lambda: fj.argmin(fj.zeros((2, 0)), axis=1), fj.ShapeError, "argmin: attempt to get argmin of an empty sequence"),
    # other
    (lambda: fj.asarray([1, [2]]), fj.FusejitError, "asarray: cannot convert list to an array"),
    (lambda: fj.asarray(np.ones(2), name="1bad"), fj.FusejitError, "input name '1bad' is not an identifier"),
    (lambda: fj.asarray(X, name="a b"), fj.FusejitError, "input name 'a b' is not an identifier"),
    (lambda: fj.arange(0, 1, 0), fj.FusejitError, "arange: step must not be zero"),
    (lambda: fj.ones(3).item(), fj.ShapeError, "item() needs a tensor of one element, got shape (3,)"),
    (lambda: bool(fj.ones(3)), fj.ShapeError, "the truth value of a tensor of shape (3,) is ambiguous"),
    (lambda: fj.set_backend("tpu"), fj.BackendError, "unknown backend 'tpu'; choose one of cuda, interpret, numpy"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_error(make: object, exc: type, message: str) -> None:
    with pytest.raises(exc, match=re.escape(message)):
        make()  # type: ignore[operator]


def test_errors_are_raised_at_record_time_not_realize() -> None:
    """The error points at the user's line: nothing was computed before it."""
    lazy = fj.exp(X) * 2
    with pytest.raises(fj.ShapeError):
        lazy + fj.ones(7)
    assert not lazy.is_realized


def test_fusejit_backend_env_var_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from fusejit import runtime
    monkeypatch.setenv("FUSEJIT_BACKEND", "gpu9000")
    with pytest.raises(fj.BackendError, match=re.escape("FUSEJIT_BACKEND='gpu9000' is not a backend")):
        runtime.default_backend_name()


# -- errors of dependencies (NumPy, the OS, missing packages) arrive as FusejitErrors --------

@pytest.mark.parametrize("make, exc, message", [
    (lambda: X.reshape("a"), fj.ShapeError, "the new shape must be integers, got ('a',)"),
    (lambda: X.reshape(2.0, 3), fj.ShapeError, "the new shape must be integers, got (2.0, 3)"),
    (lambda: fj.var(X, ddof="1"), fj.FusejitError, "var: ddof must be a number, got '1'"),
    (lambda: fj.plan(X, 3), fj.FusejitError, "plan takes fusejit Tensors, not int"),
    (lambda: fj.realize(X, [1.0]), fj.FusejitError, "realize takes fusejit Tensors, not list"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_dependency_error_becomes_fusejit_error(make: object, exc: type, message: str) -> None:
    with pytest.raises(exc, match=re.escape(message)):
        make()  # type: ignore[operator]


def test_dump_to_a_directory_is_a_fusejit_error(tmp_path) -> None:
    with pytest.raises(fj.FusejitError, match=re.escape(f"cannot write {tmp_path}: ")):
        fj.dump(X + 1, path=tmp_path)
    assert list(tmp_path.iterdir()) == []  # the temporary file is removed


def test_program_run_rejects_unconvertible_inputs(numpy_backend: str) -> None:
    program = fj.parse(fj.dump(fj.asarray(np.ones((2, 3), np.float32), name="x") * 2))
    with pytest.raises(fj.InputError, match=re.escape("input 'x': cannot convert list to an array")):
        program.run([[1.0, 2.0, 3.0], [4.0]])
    with pytest.raises(fj.InputError, match=re.escape("input 'x': cannot convert list")):
        program.run(x=[[1.0], [2.0, 3.0]])
    odd = type("Odd", (), {"dtype": "no such dtype", "shape": (2, 3)})()
    with pytest.raises(fj.InputError, match=re.escape("input 'x': 'no such dtype' is not a NumPy dtype")):
        program.run(odd)


@pytest.mark.parametrize("backend, package, message", [
    ("cuda", "cupy", "backend 'cuda' needs CuPy and a CUDA GPU; CuPy is not installed (pip install "
                     "'fusejit[cuda12]' or 'fusejit[cuda13]'); use FUSEJIT_BACKEND=interpret or numpy"),
    ("cuda", "triton", "backend 'cuda' needs Triton to compile kernels; Triton is not installed (pip "
                       "install 'fusejit[cuda12]' or 'fusejit[cuda13]'); use FUSEJIT_BACKEND=numpy "
                       "(or fj.set_backend('numpy'))"),
    ("interpret", "triton", "backend 'interpret' needs Triton; Triton is not installed (pip install "
                            "'fusejit[triton]'); use FUSEJIT_BACKEND=numpy (or fj.set_backend('numpy'))"),
])
def test_backend_without_its_package(monkeypatch: pytest.MonkeyPatch, backend: str, package: str,
                                     message: str) -> None:
    from fusejit import runtime
    if package == "triton" and backend == "cuda":  # CuPy must be there to get as far as Triton
        from .fake_cupy import FakeCupy
        monkeypatch.setitem(sys.modules, "cupy", FakeCupy())
    monkeypatch.setitem(sys.modules, package, None)  # makes `import package` fail
    monkeypatch.setattr(runtime, "_backends", {})
    with pytest.raises(fj.BackendUnavailableError, match=re.escape(message)):
        with fj.using_backend(backend):
            (X + 1).realize()


def test_unusable_cache_dir_is_a_backend_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from fusejit.runtime import kernel_cache
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(blocker / "cache"))
    with pytest.raises(fj.BackendError, match=re.escape("FUSEJIT_CACHE_DIR")):
        kernel_cache.cache_dir()
    with pytest.raises(fj.BackendError, match=re.escape(f"cannot write the cache file {tmp_path}")):
        kernel_cache.atomic_write(tmp_path, b"x")  # the target is a directory


def test_full_and_arange_reject_what_numpy_rejects():
    with pytest.raises(fj.DTypeError, match="Python integer 300 is out of bounds for int8"):
        fj.full((2,), 300, dtype=np.int8)
    with pytest.raises(fj.DTypeError, match="fill_value must be a real scalar, got str"):
        fj.full(2, "x")
    for bad in (float("nan"), float("inf"), "a"):
        with pytest.raises(fj.FusejitError, match="finite real numbers"):
            fj.arange(bad)
    assert fj.full((2,), np.float32(1.5)).dtype == np.float32  # a NumPy scalar keeps its dtype
