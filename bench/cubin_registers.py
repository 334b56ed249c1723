"""Registers and stack of every GEMM cubin in fusejit's disk cache (``FUSEJIT_CACHE_DIR``),
read with the ``cuobjdump`` Triton ships: whether a launch's ``maxnreg`` reached ptxas.

Run: ``python3 bench/cubin_registers.py [REGEX over entry names]``.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from sass_gemm_loop import _tool

from fusejit.runtime import kernel_cache as kc
from fusejit.runtime.compile import decode_entry


def main() -> int:
    pattern = sys.argv[1] if len(sys.argv) > 1 else "matmul"
    for path in sorted((kc.cache_dir() / "cubin").glob("*.entry")):
        if not re.search(pattern, path.name):
            continue
        compiled = decode_entry(path.read_bytes())
        with tempfile.TemporaryDirectory() as tmp:
            cubin = Path(tmp) / "k.cubin"
            cubin.write_bytes(compiled.cubin)
            usage = subprocess.run([_tool("cuobjdump"), "-res-usage", str(cubin)],
                                   capture_output=True, text=True, check=True).stdout
        regs = re.search(r"REG:(\d+)", usage)
        stack = re.search(r"STACK:(\d+)", usage)
        name = re.sub(r"^[0-9a-f]+-", "", path.name)
        print(f"{name}: {regs.group(1) if regs else '?'} registers, stack "
              f"{stack.group(1) if stack else '?'} B")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
