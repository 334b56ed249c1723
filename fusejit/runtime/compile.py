"""Triton as a compiler only: generated source -> cubin, without a GPU and without torch.

``compile_launch`` compiles one ``Launch`` of an ``EmittedKernel`` for a CUDA
target (``GPUTarget("cuda", cc, 32)``), with pointer arguments marked
16-byte divisible where the buffers bound at launch are (a separate variant
otherwise). Cubins are cached on disk, keyed by the source hash, the Triton
version, the target and the specialization. An entry is one file (written
atomically): a JSON header line (symbol, shared memory, parameter counts, the
cubin's size and SHA-256) and the cubin bytes after it, so a header never
describes another cubin. An entry that does not check out (truncated,
garbage, a header that does not parse) is rebuilt with a warning.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path

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
    #: bytes of global scratch per program (TMA descriptors made in the kernel), and the
    #: alignment of that buffer; the launcher passes ``grid size * scratch`` bytes
    scratch: int = 0
    scratch_align: int = 1
    #: ptxas reported that it serialized the wgmma instructions of the main loop (checked for
    #: a ``relayable`` GEMM only: ``EmittedKernel.relayable``)
    serialized_mma: bool = False
    #: bytes of local memory a thread uses, its spilled registers (read from the cubin for a
    #: GEMM whose epilogue could run in slices or does: ``EmittedKernel.epilogue_splittable``;
    #: None: not read, as in entries written before the field: ``stack_bytes``)
    stack: int | None = None


def _count_params(ptx: str, name: str) -> int:
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
    if m is None:
        raise RuntimeError(f"kernel {name} not found in the compiled PTX")
    return len(re.findall(r"\.param\b", m.group(1)))


#: fields of an entry's header line besides the cubin's size and digest
_HEADER_FIELDS = ("name", "shared", "num_warps", "n_params", "n_args")
#: later fields, absent from older entries (read as their defaults)
_OPTIONAL_FIELDS = {"scratch": 0, "scratch_align": 1, "serialized_mma": False, "stack": None}
#: the types each of those may have in an entry
_OPTIONAL_TYPES = {"scratch": (int,), "scratch_align": (int,), "serialized_mma": (bool,),
                   "stack": (int, type(None))}


def encode_entry(compiled: Compiled) -> bytes:
    """A disk cache entry: one JSON header line, then the cubin."""
    header = {f: getattr(compiled, f) for f in (*_HEADER_FIELDS, *_OPTIONAL_FIELDS)}
    header["size"] = len(compiled.cubin)
    header["sha256"] = hashlib.sha256(compiled.cubin).hexdigest()
    return json.dumps(header, sort_keys=True).encode() + b"\n" + compiled.cubin


def decode_entry(data: bytes) -> Compiled:
    """The Compiled of an entry; ValueError when it is truncated or corrupt."""
    head, sep, cubin = data.partition(b"\n")
    if not sep:
        raise ValueError("no header line")
    try:
        header = json.loads(head)
        fields = [header[f] for f in _HEADER_FIELDS]
        extra = [header.get(f, default) for f, default in _OPTIONAL_FIELDS.items()]
        size, digest = header["size"], header["sha256"]
    except (ValueError, KeyError, TypeError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"bad header: {exc}") from None
    if len(cubin) != size:
        raise ValueError(f"cubin of {len(cubin)} bytes, header says {size}")
    if hashlib.sha256(cubin).hexdigest() != digest or cubin[:4] != b"\x7fELF":
        raise ValueError("cubin does not match its checksum")
    name, shared, num_warps, n_params, n_args = fields
    if not (isinstance(name, str)
            and all(type(v) in _OPTIONAL_TYPES[f] for f, v in zip(_OPTIONAL_FIELDS, extra))
            and all(type(v) is int for v in (shared, num_warps, n_params, n_args))):
        raise ValueError("bad header field types")
    return Compiled(name, cubin, shared, num_warps, n_params, n_args, *extra)


def _load_entry(path: Path, warn: bool = True) -> Compiled | None:
    """The entry at ``path``; None (with a warning if ``warn``) when missing or corrupt."""
    try:
        return decode_entry(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        if warn:
            warnings.warn(f"fusejit: rebuilding corrupt cubin cache entry {path} ({exc})",
                          stacklevel=3)
        return None


def compile_launch(emitted: EmittedKernel, launch: Launch, divisible: tuple[bool, ...],
                   cc: int = 90) -> Compiled:
    """Compile one launch (cached on disk); ``divisible[i]``: pointer arg i is 16-byte aligned.

    Thread-safe: compiles hold ``kernel_cache.TRITON_LOCK`` (so a launch that several
    threads need at once is compiled once, the others read the entry it wrote).
    """
    spec = "".join("d" if d else "n" for d in divisible)
    stages = f"-s{launch.num_stages}" if launch.num_stages else ""
    stages += f"-r{launch.max_registers}" if launch.max_registers else ""
    key = f"{kc.source_hash(emitted.source)}-{launch.fn_name}-{launch.num_warps}{stages}-{spec}-sm{cc}"
    key += f"-triton{kc.triton_version()}"
    path = kc.cache_dir() / "cubin" / f"{key}.entry"
    found = _load_entry(path)
    if found is not None:
        return found
    with kc.TRITON_LOCK:
        found = _load_entry(path, warn=False)  # written by another thread meanwhile?
        if found is not None:
            return found
        result = _compile(emitted, launch, divisible, cc)
        kc.atomic_write(path, encode_entry(result))
    return result


def _compile(emitted: EmittedKernel, launch: Launch, divisible: tuple[bool, ...],
             cc: int) -> Compiled:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    path = kc.write_source(emitted)
    module = kc.import_source(path, interpret=False)
    fn = getattr(module, launch.fn_name)
    signature = dict(launch.signature)
    attrs = {(i,): [["tt.divisibility", 16]] for i, d in enumerate(divisible) if d}
    src = ASTSource(fn, signature, {}, attrs)
    options = {"num_warps": launch.num_warps, "enable_fp_fusion": False}
    if launch.num_stages:
        options["num_stages"] = launch.num_stages
    if launch.max_registers:
        options["maxnreg"] = launch.max_registers
    compiled = triton.compile(src, target=GPUTarget("cuda", cc, 32), options=options)
    name = compiled.metadata.name
    scratch = int(getattr(compiled.metadata, "global_scratch_size", 0) or 0)
    align = int(getattr(compiled.metadata, "global_scratch_align", 1) or 1)
    # (wgmma is Hopper's alone: sm_90a)
    serialized = emitted.relayable and cc == 90 and ptxas_serializes_mma(compiled.asm["ptx"], cc)
    spills_matter = emitted.epilogue_splittable or emitted.epilogue_slices > 1
    stack = cubin_stack_bytes(compiled.asm["cubin"]) if spills_matter else None
    return Compiled(name, compiled.asm["cubin"], int(compiled.metadata.shared), launch.num_warps,
                    _count_params(compiled.asm["ptx"], name), len(signature), scratch, align,
                    serialized, stack)


def stack_bytes(compiled: Compiled) -> int:
    """``compiled.stack``, read from its cubin where the entry did not record it."""
    return cubin_stack_bytes(compiled.cubin) if compiled.stack is None else compiled.stack


def cubin_stack_bytes(cubin: bytes) -> int:
    """Bytes of stack (local memory) a thread of ``cubin``'s kernel uses: where Triton's
    kernels use any, it holds spilled registers (``cubin_resource_usage``); 0 when it cannot
    be read (the check only decides whether to try a kernel that spills less)."""
    try:
        return cubin_resource_usage(cubin).get("STACK", 0)
    except (OSError, subprocess.SubprocessError):
        return 0


def cubin_resource_usage(cubin: bytes) -> dict[str, int]:
    """The resources a thread of ``cubin``'s kernels uses, as ``cuobjdump -res-usage`` (the
    one Triton ships, a few milliseconds) names them: ``REG``, ``STACK``, ``SHARED``,
    ``LOCAL``... (the most over the cubin's functions); raises ``OSError`` or
    ``subprocess.SubprocessError`` where the tool cannot run."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        run = subprocess.run([cuobjdump_path(), "-res-usage", str(path)], capture_output=True,
                             text=True, timeout=60, check=True)
    usage: dict[str, int] = {}
    for name, value in re.findall(r"([A-Z]+):(\d+)", run.stdout):
        usage[name] = max(usage.get(name, 0), int(value))
    return usage


def cuobjdump_path() -> str:
    """The ``cuobjdump`` that Triton ships (its NVIDIA backend's ``bin``)."""
    import triton
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")


#: what ptxas prints when it gives up pipelining a kernel's wgmma instructions (C7514 and the
#: like: "Potential Performance Loss: wgmma.mma_async instructions are serialized due to ...")
_SERIALIZED_MMA = "wgmma.mma_async instructions are serialized"


def ptxas_serializes_mma(ptx: str, cc: int) -> bool:
    """Whether the ptxas that Triton uses says it serializes the wgmma instructions of
    ``ptx`` (Triton keeps ptxas's report to itself: this assembles the PTX again, about a
    fifth of a second for a GEMM, and only for kernels that could avoid it)."""
    import subprocess
    import tempfile

    from triton.backends.nvidia.compiler import get_ptxas
    arch = f"sm_{cc}a" if cc == 90 else f"sm_{cc}"  # (Triton's own choice of target)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        try:
            run = subprocess.run([get_ptxas(cc).path, "-v", f"--gpu-name={arch}", str(src),
                                  "-o", str(Path(tmp) / "kernel.cubin")],
                                 capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:  # (Triton compiled it: unlikely)
            warnings.warn(f"fusejit: could not ask ptxas whether it serializes a GEMM's main "
                          f"loop ({exc}); the kernel keeps its epilogue as emitted", stacklevel=2)
            return False
    return _SERIALIZED_MMA in run.stdout + run.stderr


def compile_all(emitted: EmittedKernel, cc: int = 90, divisible: bool = True) -> list[Compiled]:
    """Every launch of a kernel compiled with all pointers divisible (or none)."""
    out = []
    for launch in emitted.launches:
        flags = tuple(divisible for _ in launch.signature)
        out.append(compile_launch(emitted, launch, flags, cc))
    return out
