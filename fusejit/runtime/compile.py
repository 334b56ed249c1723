"""Triton as a compiler only: generated source -> cubin, without a GPU and without torch.

``compile_launch`` compiles one ``Launch`` of an ``EmittedKernel`` for a CUDA
target (``GPUTarget("cuda", cc, 32)``), with pointer arguments marked
16-byte divisible where the buffers bound at launch are (a separate variant
otherwise). Cubins are cached on disk, keyed by the source hash, the Triton
version, the target and the specialization; a corrupt entry is rebuilt with a
warning.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass

from ..codegen import EmittedKernel, Launch
from . import kernel_cache as kc


@dataclass(frozen=True)
class Compiled:
    """A compiled launch: cubin bytes and what the launcher needs to know."""

    name: str            # symbol in the cubin
    cubin: bytes
    shared: int          # bytes of shared memory
    num_warps: int
    n_params: int        # .param entries in the PTX entry (our args + Triton's scratch)
    n_args: int          # our pointer args


def _count_params(ptx: str, name: str) -> int:
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
    if m is None:
        raise RuntimeError(f"kernel {name} not found in the compiled PTX")
    return len(re.findall(r"\.param\b", m.group(1)))


def compile_launch(emitted: EmittedKernel, launch: Launch, divisible: tuple[bool, ...],
                   cc: int = 90) -> Compiled:
    """Compile one launch (cached on disk); ``divisible[i]``: pointer arg i is 16-byte aligned."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = "".join("d" if d else "n" for d in divisible)
    key = f"{kc.source_hash(emitted.source)}-{launch.fn_name}-{launch.num_warps}-{spec}-sm{cc}"
    key += f"-triton{kc.triton_version()}"
    base = kc.cache_dir() / "cubin" / key
    meta_path, bin_path = base.with_suffix(".json"), base.with_suffix(".cubin")
    if meta_path.exists() and bin_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
            cubin = bin_path.read_bytes()
            if len(cubin) == meta["size"] and cubin[:4] == b"\x7fELF":
                return Compiled(meta["name"], cubin, meta["shared"], meta["num_warps"],
                                meta["n_params"], meta["n_args"])
            raise ValueError("size or magic mismatch")
        except (ValueError, KeyError, OSError, json.JSONDecodeError) as exc:
            warnings.warn(f"fusejit: rebuilding corrupt cubin cache entry {base} ({exc})",
                          stacklevel=2)
    path = kc.write_source(emitted)
    module = kc.import_source(path, interpret=False)
    fn = getattr(module, launch.fn_name)
    signature = dict(launch.signature)
    attrs = {(i,): [["tt.divisibility", 16]] for i, d in enumerate(divisible) if d}
    src = ASTSource(fn, signature, {}, attrs)
    options = {"num_warps": launch.num_warps, "enable_fp_fusion": False}
    with kc.TRITON_LOCK:  # Triton compiles are not thread-safe
        compiled = triton.compile(src, target=GPUTarget("cuda", cc, 32), options=options)
    cubin = compiled.asm["cubin"]
    name = compiled.metadata.name
    n_params = _count_params(compiled.asm["ptx"], name)
    result = Compiled(name, cubin, int(compiled.metadata.shared), launch.num_warps, n_params,
                      len(signature))
    kc.atomic_write(bin_path, cubin)
    kc.atomic_write(meta_path, json.dumps({
        "name": name, "shared": result.shared, "num_warps": result.num_warps,
        "n_params": n_params, "n_args": result.n_args, "size": len(cubin)}).encode())
    return result


def compile_all(emitted: EmittedKernel, cc: int = 90, divisible: bool = True) -> list[Compiled]:
    """Every launch of a kernel compiled with all pointers divisible (or none)."""
    out = []
    for launch in emitted.launches:
        flags = tuple(divisible for _ in launch.signature)
        out.append(compile_launch(emitted, launch, flags, cc))
    return out
