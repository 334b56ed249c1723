"""The cooperative-rows kernel kind: each row too wide for one program over several programs.

An inner reduction whose values go back over the row (softmax, layer norm: the row's
statistics, then every element written from them) would read its row once per pass when
the row is too wide for one program's registers, and a few hundred rows cannot fill the
GPU. Here every row is split into chunks, one program per chunk (``heuristics``,
"cooperative rows"), in one launch: a program loads its chunk once and holds it, stores
the chunk's partials (the split reduction's: sums, (max, sum) of a sumexp, (sum, m2) of
an m2), arrives at its row's counter and waits for the row's other programs; then
``<name>_stats`` combines the row's partials in chunk order (the same bits in every
program) and the program writes its chunk's outputs from the tile it holds: one read and
one write per element. A program that waits too long gives its chunk up and the row's
last program (``<name>_finish``) re-reads it, so any scheduling order completes.

``CooperativeRowEmitter`` is the emitter of every inner reduction region; a region that
does not qualify (rows that fit a program, row values only, tiles given by the autotuner)
runs as the base emitter's ``reduction`` or ``split_reduction``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ..ir.ops import COOPERATIVE
from ..ir.program import Instr, Kernel
from . import heuristics
from .heuristics import (
    COOP_REDO_BLOCK,
    COOP_SPIN_LIMIT,
    CoopTiles,
    coop_sub_blocks,
    cooperative_tiles,
    next_pow2,
)
from .lowering import TL
from .triton_emitter import Launch, _Emitter, _m2_riders, _sumexp_riders
from .values import _ASSIGNMENT, Coords, _Fn, _instr_text


@dataclass
class _HeldTile:
    """One of the tiles a cooperative program holds its chunk in: its coordinates and the
    masks that ``_open_tile`` left open for it."""

    coords: Coords
    masks: dict[int, str | None]
    col_mask: str | None

    def use(self, fn: _Fn) -> None:
        """Make this tile the open one of ``fn`` (its masks guard what is emitted next)."""
        fn.masks = dict(self.masks)
        fn.col_mask = self.col_mask


class CooperativeRowEmitter(_Emitter):
    """Emits an inner reduction region: as cooperative rows where ``_cooperative_tiles``
    chooses them, else as the base emitter does."""

    def __init__(self, kernel: Kernel, strides: list[tuple[int, ...]], target: str,
                 tiles: Any = None, origin: str | None = None) -> None:
        super().__init__(kernel, strides, target, tiles, origin)
        #: a cooperative row's sumexp partials, by name: per tile of the chunk its
        #: exp(x - chunk max), and the chunk max (``_reuse_chunk_exps`` writes exp(x - row
        #: max) from them)
        self.chunk_exps: dict[str, tuple[list[str], str]] = {}

    def functions(self) -> tuple[list[_Fn], list[Launch]]:
        """Cooperative rows when the region qualifies, else the base emitter's kinds."""
        coop = self._cooperative_tiles()
        if coop is None:
            return super().functions()
        return self.cooperative_reduction(coop)

    def _cooperative_tiles(self) -> CoopTiles | None:
        """The chunks of a cooperative row kernel for this region (``heuristics``: wide
        rows whose values go back over the row), or None (it runs as ``reduction``)."""
        d = self.domain
        if not heuristics.COOPERATIVE_ROWS or self.tiles is not None:
            return None  # (``emitter_class`` sends only inner, unsplit reductions here)
        stages = self._stages()
        if len(stages) != 1 or not all(r.op in COOPERATIVE for r in stages[0]):
            return None
        if not any(self.types[y].shape == d.shape for y in self.kernel.yields):
            return None  # (row values only: a split reduction's job)
        looped = heuristics.reduction_candidates(self.target, d.rows, d.reduce_size, False,
                                                 self._itemsize(), self._state())[0]
        if looped.persistent:
            return None
        row_items = tuple({p.type.dtype.itemsize for p in self.kernel.params
                           if not p.scalar and p.type.shape == d.shape}
                          | {self.types[y].dtype.itemsize for y in self.kernel.yields
                             if self.types[y].shape == d.shape})
        ops = frozenset(r.op for r in stages[0])
        t = cooperative_tiles(self.target, d.rows, d.reduce_size, self._itemsize(), row_items,
                              self._window_words(), ops)
        if t is None:
            return None
        return coop_sub_blocks(self.target, t, ops, self._itemsize(), d.reduce_size,
                               self._row_vectors())


    def cooperative_reduction(self, t: CoopTiles) -> tuple[list[_Fn], list[Launch]]:
        """Each row over ``t.chunks`` programs that read their chunk once (``heuristics``,
        "cooperative rows"): one launch, one read and one write per element.

        A program takes a ticket (``counters[0]``, in start order): row ``ticket //
        chunks``, chunk ``ticket % chunks``. It loads its chunk as one tile, stores the
        chunk's partial of each reduction (the split reduction's partials: sums, (max, sum)
        for sumexp, (count, mean, m2) for m2, from the tile it holds) and arrives at its
        row's counter. On ``cuda`` it then waits until the row's programs have all
        arrived, at most ``COOP_SPIN_LIMIT`` spins; when they have, ``<name>_stats``
        combines the row's partials in chunk order (the same bits in every program) and
        the program writes its chunk's outputs from the tile it still holds. Otherwise it
        flags its chunk given up. Then it settles on a second counter; the row's last to
        settle calls ``<name>_finish``, which writes the row's own outputs and re-reads the
        chunks given up (the interpreter runs programs one after another: there every chunk
        of a row but the last is given up, so this path is checked on the CPU too), and
        zeroes the row's counters and flags. The program that draws the last ticket zeroes
        the ticket at once: every other ticket is drawn by then, and the next launch on
        the stream starts after this one ends. (A count of programs done, the grid's last
        zeroing the ticket, cost every program an ordered atomic on one address; with it, a
        partials layout that put a row's partials 256 apart and a loop reading every flag,
        this kernel ran at 45-65% of the copy rate at 256 rows of 2**18 float32, 80% now.)

        Memory ordering as in ``split_reduction``: a CTA barrier before each atomic that
        publishes stores (release), acquire on the counts read, partials and flags loaded
        with ``.cg``. The settle count publishes nothing on the fast path (relaxed); a
        program giving its chunk up settles with release after its flag, and the row's last
        to settle acquires before it reads the flags. A row's partials are side by side
        (``row * chunks + chunk``). Counters: the ticket, then per row its arrivals, per row
        its settled programs, and per chunk its flag (``EmittedKernel.counters``).
        """
        d = self.domain
        rows, cols = d.rows, d.reduce_size
        n_split, bn, num_warps = t.chunks, t.block, t.num_warps
        (stage,) = self._stages()
        riders = _sumexp_riders(stage)  # (no partials of their own)
        sum_riders = _m2_riders(stage, self._acc_dtype)
        computed = [r for r in stage if r.name not in riders and r.name not in sum_riders]
        slots, part_names = self._partial_slots(computed, n_split, cooperative=True)
        arrivals, settled, given_up = 1, 1 + rows, 1 + 2 * rows
        self.counters = 1 + 2 * rows + rows * n_split
        fn = _Fn(self)
        fn.used.update({"ticket", "pid", "chunk", "rows", "row_mask", "cols", "col_mask", "mask",
                        "arrived", "spins", "counters", *part_names})
        out = fn.out
        self._bm, self._bn = 1, bn
        out.append('ticket = tl.atomic_add(counters, 1, sem="relaxed")  # in the order programs '
                   'start')
        out.append(f"if ticket == {rows * n_split - 1}:  # the last ticket: zero for the next launch")
        out.append('    tl.atomic_xchg(counters, 0, sem="relaxed")')
        out.append(f"pid = ticket // {n_split}{'.to(tl.int64)' if self.idx64 else ''}  # the row")
        out.append(f"chunk = ticket % {n_split}  # its chunk of {bn} elements, of {n_split}")
        n_sub = t.sub_blocks
        sub = bn // n_sub
        self._bn = sub
        step, limit = self._chunk_columns("chunk", bn, t.span)
        row_mask = self._open_rows(fn, 1, rows)
        self._coop_window = t.window
        if t.window:  # (chunk k from the row's first word: its columns k * bn - shift on)
            self._open_window(fn, 1, t.window)
        tiles: list[_HeldTile] = []
        for k in range(n_sub):  # (the chunk as one tile, or as n_sub held side by side)
            start = f"chunk * {step} + " + (f"{k * sub} + " if k else "")
            suffix = f"_{k}" if n_sub > 1 else ""
            fn.used.update({f"cols{suffix}", f"col_mask{suffix}", f"mask{suffix}"})
            coords = self._open_tile(fn, start, False, cols % bn != 0 or bool(t.window),
                                     row_mask, suffix, limit)
            tiles.append(_HeldTile(coords, dict(fn.masks), fn.col_mask))
        at = f"rows * {n_split} + chunk"  # (a row's partials side by side: one or two lines)
        for r in computed:  # (of the tiles the program holds)
            vs = self._chunk_partial(fn, r, tiles, step)
            for part, v in zip(slots[r.name], vs if isinstance(vs, tuple) else (vs,)):
                out.append(f"tl.store({part} + {at}, {v})  # partial of %{r.name}")
        out.append("tl.debug_barrier()  # every thread's partials are stored before the arrival")
        out.append(f'arrived = tl.atomic_add(counters + {arrivals} + pid, 1, sem="acq_rel") + 1'
                   f"  # programs of the row arrived")
        if self.target == "cuda":  # (the interpreter runs one program at a time: no waiting)
            out.append("spins = 0")
            out.append(f"while (arrived < {n_split}) & (spins < {COOP_SPIN_LIMIT}):  "
                       f"# the row's other programs, resident: they arrive")
            out.append(f'    arrived = tl.atomic_add(counters + {arrivals} + pid, 0, '
                       f'sem="acquire")')
            out.append("    spins += 1")
            out.append("tl.debug_barrier()")
        stats_name, finish_name = f"{self.name}_stats", f"{self.name}_finish"
        stats = self._coop_stats(stats_name, stage, computed, riders, sum_riders, slots,
                                 part_names, n_split, step)
        self._bm, self._bn = 1, sub  # (the stats function's tile was its partials')
        out.append(f"if arrived >= {n_split}:  # every partial of the row is stored: "
                   f"the chunk held is written")
        mark = len(out)
        self._call_stats(fn, stage, stats_name, "pid", part_names)
        for k, tile in enumerate(tiles):  # (each tile's outputs whole before the next)
            tile.use(fn)
            self._reuse_chunk_exps(fn, stage, tile.coords, k)
            self._store_domain_outputs(fn, tile.coords)
        out.append(f'settled = tl.atomic_add(counters + {settled} + pid, 1, sem="relaxed")'
                   f"  # (it publishes nothing)")
        out[mark:] = ["    " + line for line in out[mark:]]
        out.append("else:  # waited too long: the row's last program writes this chunk")
        out.append(f"    tl.store(counters + {given_up} + pid * {n_split} + chunk, 1)")
        out.append("    tl.debug_barrier()  # the flag is stored before this program settles")
        out.append(f'    settled = tl.atomic_add(counters + {settled} + pid, 1, sem="release")')
        finish, finish_params = self._coop_finish(finish_name, stats_name, stage, part_names,
                                                  n_split, bn, given_up, t.span)
        call = ", ".join(part_names + [self.ptr_name[i] for i in finish_params]
                         + ["counters"] + self.out_name)
        out.append(f"if settled == {n_split - 1}:  # the row's last to settle")
        out.append(f'    tl.atomic_add(counters + {settled} + pid, 0, sem="acquire")  '
                   f"# every flag stored before a settle is seen")
        out.append("    tl.debug_barrier()")
        out.append(f"    {finish_name}(pid, {call})")
        out.append(f'    tl.atomic_xchg(counters + {arrivals} + pid, 0, sem="relaxed")  '
                   f"# the row's counters are zero again")
        out.append(f'    tl.atomic_xchg(counters + {settled} + pid, 0, sem="relaxed")')
        self.tiling = [f"cooperative rows: {t.why} ({rows * n_split} programs, {num_warps} "
                       f"warps): each reads its chunk once, waits for its row's partials, "
                       f"then writes the chunk (a chunk given up is re-read by the row's last "
                       f"program)"]
        programs, max_registers = rows * n_split, t.max_registers
        if heuristics.COOP_PIPELINE:
            programs = self._pipeline_chunks(fn, rows * n_split, arrivals)
            max_registers = 0  # (two chunks held: no cap that one chunk's halves fit)
            self.tiling = [f"cooperative rows, pipelined: {t.why}, {programs} persistent "
                           f"programs of {num_warps} warps taking the {rows * n_split} chunks "
                           f"in turn: each loads its next chunk and stores that chunk's "
                           f"partials before it waits for the row of the chunk it holds, then "
                           f"writes that chunk (a chunk given up is re-read by the row's last "
                           f"program)"]
        launch = self._partials_launch(fn, part_names, (programs, 1, 1), num_warps)
        return [fn, stats, finish], [replace(launch, max_registers=max_registers)]


    def _pipeline_chunks(self, fn: _Fn, total: int, arrivals: int) -> int:
        """Rewrite the cooperative program ``fn`` (one chunk per program) as a persistent one
        (``COOP_PIPELINE``); returns its number of programs.

        The one-chunk program is: draw a ticket, *take* its chunk (indices, loads, the
        chunk's partials, their stores), arrive at the row's counter, wait for the row's
        other chunks, *write* the chunk. The persistent program takes a chunk, then loops:
        draw the next ticket and take its chunk (its partials stored and its arrival made at
        once), then wait for the row of the chunk it holds and write that one. The wait for
        a row then overlaps the next chunk's load. The values the write reads are carried
        from one iteration to the next; indices are recomputed from the ticket (a loop-carried
        index tile would hold registers the loads need). A program past the last chunk takes
        the last chunk again (loaded, never stored or counted), so every load is unmasked as
        before.

        No program waits for one that waits for it: arrivals never wait, and every ticket
        below the highest drawn has arrived, so a program waits only on the row being drawn,
        whose chunks at most half the programs hold (two each) while the others finish rows
        before it. Every program draws exactly one ticket past the last chunk (the one that
        ends its loop), so the ticket counter ends at ``total + programs`` and the program
        that draws the last of those zeroes it for the next launch."""
        out = fn.out
        per_sm = heuristics.COOP_PIPELINE_PROGRAMS_PER_SM
        programs = max(1, min(total, per_sm * heuristics.SMS))
        draw, reset_if, reset = out[0], out[1], out[2]
        if not (draw.startswith("ticket = tl.atomic_add(counters, 1") and
                reset_if.startswith("if ticket == ")):
            raise AssertionError("the cooperative program's ticket lines moved")
        arrive_at = next(i for i, line in enumerate(out) if line.startswith("arrived = "))
        take = out[3:arrive_at]
        # (the partials' stores, moved after the values: they read no stored value)
        guarded = [line for line in take if line.startswith("tl.")]
        assigned = [line for line in take if not line.startswith("tl.")]
        if any(not _ASSIGNMENT.match(line) for line in assigned):
            raise AssertionError("the cooperative program's chunk is not straight assignments")
        wait_and_write = out[arrive_at + 1:]
        cur = fn.fresh("cur")
        assigned = [f"{cur} = tl.minimum(ticket, {total - 1})  # (a ticket past the last chunk "
                    f"takes the last chunk again: loaded, never stored)"] + \
            [re.sub(r"\bticket\b", cur, line) for line in assigned]
        parsed = [_ASSIGNMENT.match(line).groups()[1:] for line in assigned]  # type: ignore[union-attr]
        names = [name for name, _ in parsed]
        data: set[str] = set()  # (names whose values come from the chunk's loads)
        for name, value in parsed:
            if "tl.load(" in value or set(re.findall(r"\b\w+\b", value)) & data:
                data.add(name)
        read_later = set(re.findall(r"\b\w+\b", "\n".join(wait_and_write)))
        carried = [n for n in names if n in data and n in read_later]
        arrive = f'tl.atomic_add(counters + {arrivals} + pid, 1, sem="acq_rel")  # the chunk ' \
            f"arrives: its partials are stored"

        def renamed(lines: list[str], suffix: str) -> tuple[list[str], dict[str, str]]:
            table = {n: fn.fresh(f"{n}_{suffix}") for n in ["ticket", *names]}
            pattern = re.compile(r"\b(" + "|".join(map(re.escape, table)) + r")\b")
            def one(line: str) -> str:  # (the code, not its comment)
                code, sep, comment = line.partition("  # ")
                return pattern.sub(lambda m: table[m.group(1)], code) + sep + comment
            return [one(line) for line in lines], table

        last = total + programs - 1
        take_lines = [draw, f"if ticket == {last}:  # the last ticket drawn (every program draws "
                            f"one past the last chunk): zero for the next launch", reset,
                      *assigned, f"if ticket < {total}:  # a chunk of the grid: its partials "
                                 f"and its arrival", *["    " + ln for ln in guarded],
                      "    " + arrive]
        first, first_of = renamed(take_lines, "first")
        following, next_of = renamed(take_lines, "next")
        index_lines = [line for line, name in zip(assigned, names) if name not in data]
        body = [*following, "# the chunk held: its row's partials, then its outputs",
                *index_lines,
                f'arrived = tl.atomic_add(counters + {arrivals} + pid, 0, sem="acquire")  '
                f"# programs of the row arrived", *wait_and_write,
                f"ticket = {next_of['ticket']}", *[f"{n} = {next_of[n]}" for n in carried]]
        fn.out = [*first, f"ticket = {first_of['ticket']}",
                  *[f"{n} = {first_of[n]}" for n in carried],
                  f"while ticket < {total}:  # this program's chunks, one after another",
                  *["    " + line for line in body]]
        return programs


    def _chunk_partial(self, fn: _Fn, r: Instr, tiles: list[_HeldTile], chunk: int) -> Any:
        """The partial(s) of reduction ``r`` over a cooperative program's chunk of ``chunk``
        columns, held as ``tiles`` (one, or several: ``coop_sub_blocks``): an m2's and a
        sumexp's from every tile at once (``_chunk_m2``, ``_chunk_sumexp``), a sum as the sum
        of its tiles' sums, any other reduction of its one tile."""
        if r.op == "m2":
            return self._chunk_m2(fn, r, tiles, chunk)
        if r.op == "sumexp":
            return self._chunk_sumexp(fn, r, tiles)
        if len(tiles) > 1 and r.op != "sum":
            raise AssertionError(f"a chunk held as tiles reduces sums, m2s and sumexps, "
                                 f"not {r.op}")
        parts = []
        for tile in tiles:
            tile.use(fn)
            parts.append(self._reduce_tile(fn, r, fn.value(r.args[0], tile.coords), None,
                                           partial=True))
        if len(parts) == 1:
            return parts[0]
        return fn.emit(1, " + ".join(parts), f"part_{self.var_name(r.name)}",
                       _instr_text(r) + " (partial: the sum of its tiles' sums)")


    def _chunk_sumexp(self, fn: _Fn, r: Instr, tiles: list[_HeldTile]) -> tuple[str, str]:
        """(max, sum of exp(x - max)) of a cooperative program's chunk held as ``tiles``, as
        ``_online_reduce`` combines them: the chunk's max over its tiles' maxes
        (NaN-propagating), then each tile's exps from that one max (kept in ``chunk_exps``
        for ``_reuse_chunk_exps``)."""
        dt = self._acc_dtype(r)
        hint = "part_" + self.var_name(r.name)
        held = []
        for tile in tiles:
            tile.use(fn)
            held.append(self._masked(fn, r, fn.value(r.args[0], tile.coords), dt))
        # (equal values, both -inf, count 1 as the online update does, so a chunk of -inf
        # weighs exp(-inf - max) = 0 in the combine, not NaN)
        maxes = []
        for tile, t in zip(tiles, held):
            tile.use(fn)
            maxes.append(self._row_max(fn, t, dt, f"{hint}_max"))
        m = maxes[0]
        for other in maxes[1:]:
            m = fn.emit(1, f"tl.maximum({m}, {other}, propagate_nan=tl.PropagateNan.ALL)",
                        f"{hint}_max", "the chunk's max")
        exps, sums = [], []
        for tile, t in zip(tiles, held):
            tile.use(fn)
            e = self._exp(fn, f"{t} - {m}", dt, 2, f"{hint}_exp")
            e = fn.emit(2, f"tl.where({t} == {m}, 1, {e})", f"{hint}_exp")
            exps.append(e)
            if fn.masks[2]:
                e = fn.emit(2, f"tl.where({fn.masks[2]}, {e}, 0)", f"{hint}_exp")
            sums.append(f"tl.reduce({e}, 1, tl.standard._sum_combine)[:, None]")
        self.chunk_exps[r.name] = (exps, m)
        return m, fn.emit(1, " + ".join(sums), f"{hint}_sum", _instr_text(r) + " (partial)")


    def _chunk_m2(self, fn: _Fn, r: Instr, tiles: list[_HeldTile], chunk: int
                  ) -> tuple[str, str]:
        """(sum, m2) of a cooperative program's chunk of ``chunk`` columns, held as ``tiles``:
        the chunk's sum (of the tiles' sums), its mean, then the squared deviations of every
        tile from that one mean.
        The stats function takes the count from the chunk's place in the row (Triton 3.6
        miscompiled the count as a sum of the column mask beside the other sums of the chunk:
        "operand does not dominate") and divides the sum by it as this chunk does, so a sum
        of the same operand shares the partial."""
        dt = self._acc_dtype(r)
        hint = "part_" + self.var_name(r.name)
        total = "tl.reduce({}, 1, tl.standard._sum_combine)[:, None]"
        held = []
        for tile in tiles:
            tile.use(fn)
            x = fn.value(r.args[0], tile.coords)
            held.append((self._masked(fn, r, x, dt), tile, fn.masks[2]))
        count = f"{chunk}"
        if held[0][2]:  # (a masked chunk: its columns in the row)
            shift = fn.emit(1, "row_at - word_at", "shift", "the row's start in its word") \
                if self._coop_window else None
            count = f"{self._chunk_count('chunk', chunk, shift)}.to({TL[dt]})"
        n = fn.emit(1, f"tl.full([{self._bm}, 1], {count}, {TL[dt]})", f"{hint}_n")
        chunk_sum = fn.emit(1, " + ".join(total.format(t) for t, _, _ in held), f"{hint}_sum")
        mean = fn.emit(1, f"{chunk_sum} / tl.where({n} == 0, 1, {n})", f"{hint}_mean")
        squares = []
        for t, tile, mask in held:
            tile.use(fn)
            dev = f"{t} - {mean}"
            d = fn.emit(2, f"tl.where({mask}, {dev}, 0)" if mask else dev, f"{hint}_dev")
            squares.append(total.format(f"{d} * {d}"))
        return chunk_sum, fn.emit(1, " + ".join(squares), f"{hint}_m2",
                                  _instr_text(r) + " (partial)")


    def _reuse_chunk_exps(self, fn: _Fn, stage: list[Instr], coords: Coords,
                          tile: int = 0) -> None:
        """In a cooperative row's fast path: each ``exp(a - max(a))`` of the region (softmax's
        numerator) as ``exp(a - chunk max) * exp(chunk max - row max)``, from the exps that the
        chunk's sumexp partial of ``a`` computed. One exp per element instead of two (the
        hand-written kernel of ``bench/exp_wide_softmax2.py`` at 2**18-wide float32 rows: 80%
        of the copy rate with two, 84-86% with one); as close to the float64 softmax as
        NumPy's float32 one (``tests/test_cooperative_rows.py``). Equal values (both
        infinite) keep NumPy's answer: the chunk's exp counts 1 there (``_sumexp_tile``) and
        exp(inf - inf) is NaN, as exp(x - max) is. ``tile``: which of the chunk's tiles
        ``coords`` is (``coop_sub_blocks``)."""
        maxes = {r.name: r.args[0] for r in stage if r.op == "max"}
        partials = {r.args[0]: r.name for r in stage
                    if r.op == "sumexp" and r.name in self.chunk_exps}
        for instr in self.kernel.body:
            if instr.op != "exp" or instr.type.shape != self.domain.shape:
                continue
            shifted = self.defs.get(instr.args[0])
            if shifted is None or shifted.op != "sub":
                continue
            a, big = shifted.args
            spread = self.defs.get(big)
            if spread is not None and spread.op == "expand":
                big = spread.args[0]
            if maxes.get(big) != a or a not in partials:
                continue
            sumexp = partials[a]
            exps, chunk_max = self.chunk_exps[sumexp]
            e = exps[tile]
            if self._acc_dtype(self.defs[sumexp]) != instr.type.dtype:
                continue  # (float16 exps are rounded to float16 in the region: not the same)
            row_max = fn.row_value(big)
            hint = self.var_name(instr.name)
            key = (instr.name, "chunk scale")
            scale = fn.memo_row.get(key)
            if scale is None:  # (one per chunk, whatever its tiles)
                scale = fn.memo_row[key] = self._exp(fn, f"{chunk_max} - {row_max}",
                                                     instr.type.dtype, 1, f"{hint}_scale")
            var = fn.emit(2, f"{e} * {scale}", hint, _instr_text(instr)
                          + ": the chunk's exps, rescaled to the row's max")
            fn.memo_tile[(instr.name, coords.key())] = var


    def _coop_stats(self, name: str, stage: list[Instr], computed: list[Instr],
                    riders: dict[str, Instr], sum_riders: dict[str, Instr],
                    slots: dict[str, list[str]], part_names: list[str], n_split: int,
                    bn: int) -> _Fn:
        """``name(row, partials...)``: the row values of ``stage``'s reductions, combined from
        the row's ``n_split`` partials of ``bn`` columns: those of ``computed``, then the
        riders (``riders``: maxes that are a sumexp's max; ``sum_riders``: sums whose
        partials are an m2's)."""
        g = _Fn(self)
        g.used.update({"row", *part_names})
        self._open_partials(g, "row", 1, False, n_split)
        sums = self._combine_partials(g, computed, slots, n_split, row_major=True, chunk=bn)
        for r in stage:
            if r.name in sum_riders:
                g.rowvals[r.name] = self._reduce_tile(g, r, sums[sum_riders[r.name].name], None,
                                                      src=self._acc_dtype(r))
        self._ride_on_sumexps(g, riders)
        g.out.append(f"return {', '.join(g.rowvals[r.name] for r in stage)}")
        g.source = self._header(name, ["row"] + part_names) + ["    " + line for line in g.out]
        return g


    def _call_stats(self, fn: _Fn, stage: list[Instr], stats_name: str, row: str,
                    part_names: list[str]) -> None:
        """Call ``<name>_stats`` (``_coop_stats``) for ``row``: its results are the row values
        of ``stage``'s reductions in ``fn``."""
        names = [fn.fresh(self.var_name(r.name)) for r in stage]
        fn.out.append(f"{', '.join(names)} = {stats_name}({row}, {', '.join(part_names)})")
        for r, name in zip(stage, names):
            fn.rowvals[r.name] = name
            fn.level[name] = 1


    def _coop_finish(self, name: str, stats_name: str, stage: list[Instr],
                     part_names: list[str], n_split: int, bn: int, given_up: int,
                     span: int = 0) -> tuple[_Fn, list[int]]:
        """``name(row, partials..., params..., counters, outputs...)``: what the last program
        of a cooperative row does (``cooperative_reduction``); returns it and the params it
        reads. ``span``: the columns a chunk covers when fewer than ``bn``."""
        d = self.domain
        cols = d.reduce_size
        h = _Fn(self)
        h.used.update({"row", "c", "sub", "counters", "rows", "cols", "col_mask", "mask",
                       "chunks", "flags",
                       *part_names})
        self._call_stats(h, stage, stats_name, "row", part_names)
        h.out.append("rows = row + tl.arange(0, 1)[:, None]  # flat kept index")
        h.level["rows"] = 1
        h.rows = "rows"
        h.masks = {0: None, 1: None, 2: None}
        h.row_dims = h.unravel("rows", d.kept_shape) if d.kept_shape else ()
        self._store_row_outputs(h, None)
        redo = min(bn, COOP_REDO_BLOCK)
        self._bm, self._bn = 1, redo
        h.body = []
        h.memo_tile = {}
        if self._coop_window:  # (the chunks given up, laid as the programs laid them)
            self._open_window(h, 1, self._coop_window, row="row")
        step, limit = self._chunk_columns("c", bn, span)
        coords = self._open_tile(h, f"c * {step} + sub + ", True,
                                 cols % bn != 0 or bool(self._coop_window), None, "", limit)
        self._store_domain_outputs(h, coords)
        body, h.body = h.body, None
        flag = f"counters + {given_up} + row * {n_split} + c"
        sb = next_pow2(n_split)
        h.out.append(f"chunks = tl.arange(0, {sb})")
        mask = f", mask=chunks < {n_split}, other=0" if sb != n_split else ""
        h.out.append(f"flags = tl.load(counters + {given_up} + row * {n_split} + chunks{mask}, "
                     f'cache_modifier=".cg")  # one load: is any chunk given up?')
        h.out.append("if tl.reduce(flags, 0, tl.standard._elementwise_max) != 0:")
        h.out.append(f"    for c in range(0, {n_split}):  # the chunks given up, read again")
        h.out.append(f'        if tl.load({flag}, cache_modifier=".cg") != 0:')
        h.out.append(f"            for sub in range(0, {step}, {redo}):")
        h.out.extend("                " + line for line in body)
        h.out.append(f"            tl.store({flag}, 0)")
        used = self._used_params(h.out)
        h.source = self._header(name, ["row"] + part_names + [self.ptr_name[i] for i in used]
                                + ["counters"] + self.out_name)
        h.source += ["    " + line for line in h.out]
        return h, used


    def _chunk_columns(self, index: str, bn: int, span: int) -> tuple[int, str | None]:
        """(step, limit) of cooperative chunk ``index``: the columns between chunk starts
        (``span``, equal chunks, or the tile's ``bn``), and the reduced index its tile stops
        at where that is not the row's end (equal chunks)."""
        if not span:
            return bn, None
        return span, f"tl.minimum({index} * {span} + {span}, {self.domain.reduce_size})"
