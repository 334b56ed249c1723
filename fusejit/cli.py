"""The ``fusejit`` command line: check, format and run IR files.

    fusejit check FILE                      parse and verify; prints "ok"
    fusejit fmt FILE [--in-place]           canonical reprint
    fusejit run FILE --input x=x.npy --input s0=2.5 ... --output out.npz
    fusejit demo                            the tour (fusejit.demo)
    fusejit plan FILE [--explain]           the fused IR (and why each boundary exists)
    fusejit triton FILE [--target T]        the generated Triton source of every kernel
    fusejit fuzz --backend B --seconds N    random programs against NumPy (fusejit/fuzz.py)

Subcommands live in one table, ``COMMANDS``: name -> ``Command(help,
add_arguments, handler)``. Adding one is a function taking the parsed
arguments and returning an exit status, plus one entry (see ``register``).
Every ``FusejitError`` prints as ``error: ...`` on stderr with exit status 1,
never as a traceback.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from .errors import FusejitError, InputError
from .fileio import write_atomic
from .ir.ops import MATMUL_PRECISIONS


class Command(NamedTuple):
    """One subcommand: its help line, its argument setup, and its handler."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]


COMMANDS: dict[str, Command] = {}


def register(name: str, help_text: str, add_arguments: Callable[[argparse.ArgumentParser], None],
             handler: Callable[[argparse.Namespace], int]) -> None:
    """Add a subcommand (other modules may call this before ``main`` runs)."""
    COMMANDS[name] = Command(help_text, add_arguments, handler)


# -- check ------------------------------------------------------------------------

def _file_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="an IR text file (.fir)")


def _check(args: argparse.Namespace) -> int:
    from .ir.textio import load
    load(args.file)
    print("ok")
    return 0


# -- fmt --------------------------------------------------------------------------

def _fmt_arguments(p: argparse.ArgumentParser) -> None:
    _file_argument(p)
    p.add_argument("--in-place", "-i", action="store_true", help="rewrite FILE instead of printing")


def _fmt(args: argparse.Namespace) -> int:
    from .ir.printer import print_program
    from .ir.textio import load
    text = print_program(load(args.file))
    if args.in_place:
        write_atomic(Path(args.file), text)
    else:
        sys.stdout.write(text)
    return 0


# -- run --------------------------------------------------------------------------

def _run_arguments(p: argparse.ArgumentParser) -> None:
    _file_argument(p)
    p.add_argument("--input", "-I", action="append", default=[], metavar="NAME=PATH.npy",
                   help="an input array by name (repeat for each input); a scalar param "
                        "(%%s0: f32) takes a number: NAME=2.5")
    p.add_argument("--output", "-o", metavar="OUT.npz",
                   help="save the outputs here under their names (default: print them)")
    p.add_argument("--backend", choices=("cuda", "interpret", "numpy"),
                   help="backend to run on (default: FUSEJIT_BACKEND or the best available)")


def _run(args: argparse.Namespace) -> int:
    import numpy as np

    from .ir.textio import load
    from .runtime import using_backend
    program = load(args.file)
    scalars = program.scalar_inputs
    named: dict[str, Any] = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InputError(f"--input takes NAME=PATH.npy (or NAME=NUMBER for a scalar "
                             f"param), not {item!r}")
        if name in named:
            raise InputError(f"input {name!r} is given twice")
        named[name] = _scalar_value(name, path) if name in scalars else _load_array(path)
    from .runtime import check_inputs
    check_inputs(program, (), named)  # missing, extra, shape and dtype errors before running
    if args.backend:
        with using_backend(args.backend):
            outs = program.run(**named)
    else:
        outs = program.run(**named)
    from .runtime import to_numpy
    arrays = {_output_key(program.outputs, i): to_numpy(o) for i, o in enumerate(outs)}
    if args.output:
        data = io.BytesIO()
        np.savez(data, **arrays)
        write_atomic(args.output, data.getvalue())  # never half an .npz, even if killed
    else:
        for key, value in arrays.items():
            print(f"{key} = {np.array2string(value, threshold=20)}")
    return 0


def _output_key(outputs: tuple[str, ...], i: int) -> str:
    # an output returned twice gets a suffix so that no array is lost
    name = outputs[i]
    return name if outputs.index(name) == i else f"{name}_{i}"


def _scalar_value(name: str, text: str) -> Any:
    """A scalar param's value from the command line: an int, a float, true/false, inf, nan
    (never evaluated as Python); a .npy path holding a 0-d array is read as an array."""
    if text.endswith(".npy"):
        return _load_array(text)
    words = {"true": True, "false": False, "inf": float("inf"), "-inf": float("-inf"),
             "nan": float("nan")}
    if text.lower() in words:
        return words[text.lower()]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    raise InputError(f"input {name!r} is a scalar param: give a number (NAME=2.5), not {text!r}")


def _load_array(path: str) -> Any:
    import numpy as np
    try:
        value = np.load(path, allow_pickle=False)  # data, never code
    except (OSError, ValueError, EOFError) as exc:
        # NumPy takes any file that is not .npy or .npz for a pickle, and says so
        reason = ("it is not a .npy file of plain numbers (pickled Python objects are never "
                  "loaded)") if "pickle" in str(exc) else str(exc)
        raise InputError(f"cannot read input array {path}: {reason}") from None
    if not isinstance(value, np.ndarray):
        raise InputError(f"{path} holds several arrays; give one .npy file per input")
    return value


# -- demo -------------------------------------------------------------------------

def _no_arguments(p: argparse.ArgumentParser) -> None:
    return None


def _demo(args: argparse.Namespace) -> int:
    import importlib
    import importlib.util
    if importlib.util.find_spec("fusejit.demo") is None:
        raise FusejitError("the demo is not available in this build")
    demo = importlib.import_module("fusejit.demo")
    result = demo.main()
    return result if isinstance(result, int) else 0


# -- plan -------------------------------------------------------------------------

def _plan_arguments(p: argparse.ArgumentParser) -> None:
    _file_argument(p)
    p.add_argument("--explain", action="store_true",
                   help="also print what each kernel fused and why each boundary exists")


def _plan(args: argparse.Namespace) -> int:
    from .fuse import plan_for
    from .ir.textio import load
    plan = plan_for(load(args.file))
    print(plan, end="")
    if args.explain:  # as comments, so the output is still IR text that parses
        print("".join(f"# {line}\n" for line in plan.explain().splitlines()), end="")
    return 0


# -- fuzz -------------------------------------------------------------------------

def _fuzz_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=("cuda", "interpret", "numpy"),
                   help="backend to check (default: FUSEJIT_BACKEND or the best available)")
    p.add_argument("--seconds", type=float,
                   help="stop drawing programs after this long (default 60 without --count; "
                        "shrinking the last failure may run over)")
    p.add_argument("--count", type=int, metavar="N", help="stop after N programs (with --seconds: "
                                                          "whichever comes first)")
    p.add_argument("--seed", type=int, default=0, help="the same seed draws the same programs (default 0)")
    p.add_argument("--out", default="fuzz-failures", metavar="DIR",
                   help="where shrunk failures are written as pytest files (default fuzz-failures/)")
    p.add_argument("--sizes", choices=("mixed", "small"), default="mixed",
                   help="mixed: sides from 0 to a few hundred and at block boundaries (default); "
                        "small: sides up to 4")
    p.add_argument("--max-side", type=int, metavar="K", help="largest side of an input (default 1025 "
                                                             "for mixed, 4 for small)")
    p.add_argument("--max-steps", type=int, default=12, metavar="M", help="ops per program (default 12)")
    p.add_argument("--max-dims", type=int, default=4, metavar="D", help="dimensions of an input (default 4)")
    p.add_argument("--max-elements", type=int, metavar="E",
                   help="elements of an input (default 65536 for mixed sizes)")
    p.add_argument("--no-views", action="store_true",
                   help="only fresh contiguous inputs (no broadcast, transposed or sliced views)")
    p.add_argument("--cupy-inputs", action="store_true",
                   help="hand some inputs to fusejit as CuPy arrays (cuda backend; needs CuPy)")
    p.add_argument("--jit", action="store_true",
                   help="run each program through fj.jit (recorded once, then replayed)")
    p.add_argument("--matmul-precision", choices=MATMUL_PRECISIONS, default="ieee",
                   help="tf32 or tf32x3: draw matrix products too, fusejit recording float32 ones "
                        "at that precision (FUSEJIT_MATMUL_PRECISION), outputs computed from them "
                        "checked at its tolerance (fusejit.testing.matmul_tolerance); ieee (the "
                        "default): products only with --products")
    p.add_argument("--products", action="store_true",
                   help="draw matrix products at the ieee precision too (slower: a product on "
                        "the interpreter takes about 10x a pointwise program)")
    p.add_argument("--large-plans", action="store_true",
                   help="plan the programs as large arrays are: the fuser's size thresholds "
                        "lowered (fusejit.testing.large_plans), so that split reductions, "
                        "reductions kept apart from their broadcast and reversed launches meet "
                        "programs of kilobytes")
    p.add_argument("--max-failures", type=int, metavar="F", help="stop after F failures")
    p.add_argument("--no-shrink", action="store_true", help="write failures as drawn")
    p.add_argument("--shrink-seconds", type=float, default=60.0, metavar="S",
                   help="time limit for shrinking one failure (default 60)")


def _fuzz(args: argparse.Namespace) -> int:
    from .fuzz import FuzzConfig, program_strategy
    from .fuzz import main as fuzz_main
    from .runtime import get_backend
    for name in ("seconds", "count", "max_side", "max_steps", "max_dims", "max_elements", "max_failures",
                 "shrink_seconds"):
        value = getattr(args, name)
        if value is not None and value < 0:
            raise InputError(f"--{name.replace('_', '-')} must not be negative, not {value}")
    config = FuzzConfig(
        backend=args.backend or get_backend(), count=args.count,
        seconds=args.seconds if args.seconds is not None or args.count is not None else 60.0,
        seed=args.seed, out=Path(args.out), sizes=args.sizes, max_side=args.max_side,
        max_steps=args.max_steps, max_dims=args.max_dims, max_elements=args.max_elements,
        input_views=not args.no_views, cupy_inputs=args.cupy_inputs, jit=args.jit, shrink=not args.no_shrink,
        shrink_seconds=args.shrink_seconds, max_failures=args.max_failures,
        matmul_precision=args.matmul_precision, products=args.products,
        large_plans=args.large_plans)
    try:
        program_strategy(config)  # the options, checked before anything runs
    except ImportError as exc:
        raise FusejitError(f"fusejit fuzz needs Hypothesis (pip install hypothesis): {exc}") from None
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return fuzz_main(config)


register("check", "parse and verify an IR file; prints ok", _file_argument, _check)
register("fmt", "print an IR file in canonical form", _fmt_arguments, _fmt)
register("run", "run an IR file on .npy inputs", _run_arguments, _run)
register("demo", "a short tour of fusejit", _no_arguments, _demo)
register("plan", "print the fused IR of a file (--explain: why)", _plan_arguments, _plan)
register("triton", "print the generated Triton kernels of an IR file",
         lambda p: __import__("fusejit.codegen.show", fromlist=["x"]).add_arguments(p),
         lambda a: __import__("fusejit.codegen.show", fromlist=["x"]).run(a))
register("fuzz", "random programs on a backend against NumPy; failures shrunk into pytest files",
         _fuzz_arguments, _fuzz)


# -- entry point --------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    """The argparse parser with one subparser per entry of ``COMMANDS``."""
    parser = argparse.ArgumentParser(prog="fusejit", description="fusejit IR tools")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(p)
        p.set_defaults(handler=command.handler)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 error, 2 usage)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except FusejitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (``fusejit triton f.fir | head``): stop quietly
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit flush
        return 141


if __name__ == "__main__":
    sys.exit(main())
