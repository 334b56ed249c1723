"""Registers and stack of every GEMM cubin in fusejit's disk cache (``FUSEJIT_CACHE_DIR``),
read with the ``cuobjdump`` Triton ships: whether a launch's ``maxnreg`` reached ptxas.

Run: ``python3 bench/cubin_registers.py [REGEX over entry names]``.
"""

from __future__ import annotations

import re
import sys

from fusejit.runtime import kernel_cache as kc
from fusejit.runtime.compile import cubin_resource_usage, decode_entry


def main() -> int:
    pattern = sys.argv[1] if len(sys.argv) > 1 else "matmul"
    for path in sorted((kc.cache_dir() / "cubin").glob("*.entry")):
        if not re.search(pattern, path.name):
            continue
        usage = cubin_resource_usage(decode_entry(path.read_bytes()).cubin)
        name = re.sub(r"^[0-9a-f]+-", "", path.name)
        print(f"{name}: {usage.get('REG', '?')} registers, stack {usage.get('STACK', '?')} B")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
