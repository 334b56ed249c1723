"""The split-reduction kernel kind: a reduction whose kept rows are too few to fill the GPU.

A ``kind=split_reduction`` region (the fuser marks a reduction whose outputs are too few
for one program each to fill the GPU, ``fuse/rules.py``'s ``rule_split_reduction``: a sum
over the leading axis, a full sum; a user may mark one in the IR text) is one launch over
(row blocks x chunks of the reduced extent): each program runs the prologue over its chunk
into scratch partials, and the last program of each row block to finish (counted
atomically) calls ``<name>_final``, which combines the row block's partials in a fixed
order (the same bits on every run) and runs the epilogue. A region that cannot split (more
than one stage of reductions, or outputs of the domain's shape) runs as the base emitter's
``reduction``.
"""

from __future__ import annotations

from ..ir.ops import SPLITTABLE
from ..ir.program import Instr
from . import heuristics
from .heuristics import SplitTiles, next_pow2
from .triton_emitter import Launch, _Emitter
from .values import _Fn


class SplitReductionEmitter(_Emitter):
    """Emits a ``kind=split_reduction`` region (see the module docstring)."""

    def functions(self) -> tuple[list[_Fn], list[Launch]]:
        """The split launch when the region is one stage of row values, else ``reduction``."""
        if self._can_split():
            return self.split_reduction()
        return super().functions()

    def _can_split(self) -> bool:
        """Whether the region is one stage of combinable reductions writing row values only."""
        stages = self._stages()
        d = self.domain
        return (len(stages) == 1 and all(r.op in SPLITTABLE for r in stages[0])
                and all(self.types[y].shape in (d.kept_shape, d.keepdims_shape)
                        and y in d.row_dependent for y in self.kernel.yields))

    def _split_tiles(self) -> SplitTiles:
        """The tiles and partials per output of a split reduction's launch."""
        d = self.domain
        split = self.kernel.attrs.get("split")
        t = self.choose(heuristics.split_candidates(
            self.target, self.padded_rows, d.reduce_size, d.kind == "outer_reduction",
            self._itemsize(), split if isinstance(split, int) and split >= 1 else None,
            self._state(), self._run_pad()))
        return t

    def split_reduction(self) -> tuple[list[_Fn], list[Launch]]:
        """One launch over (row blocks x chunks); the last program of each row block finishes it.

        Every program runs the prologue and reduces one chunk of the reduced extent
        into a scratch buffer per partial value (``partials[chunk, row]``, in the
        accumulator dtype: float32 for float16/float32 sums, the result dtype for
        integer sums, int8 for any/all; m2 keeps (count, mean, m2), sumexp (max,
        sum)). Then it counts itself done on its row block's counter (``counters[pid]``,
        int32). The program that counts last calls ``<name>_final`` on its rows: that
        loads every partial of them in chunk order and combines them in one fixed tree
        (so a result is the same bits on every run), with the same reduction (max/min
        still propagate NaN), runs the epilogue and stores the outputs; then the counter
        is set back to 0, so the buffer that the backend zeroed once stays zeroed
        (``EmittedKernel.counters``).

        Memory ordering: a CTA barrier puts every thread's partial stores before the
        count, which one thread makes with an ``acq_rel`` atomic at GPU scope (release:
        the stores are visible before the count is; acquire: the last program's loads
        come after every other program's release); the partials load with ``.cg`` (from
        L2, never a line another row block's finish left in this SM's L1). No program
        waits for another, so any scheduling order completes.
        """
        d = self.domain
        rows, cols = d.rows, d.reduce_size
        t = self._split_tiles()  # its step already fits the chunk of one of t.split partials
        bm, bn, num_warps = t.block_m, t.block_n, t.num_warps
        row_blocks = -(-self.padded_rows // bm)
        per = max(1, -(-cols // t.split))        # elements per partial before rounding to tiles
        chunk = -(-per // bn) * bn               # a whole number of tiles
        n_split = max(1, -(-cols // chunk))
        self._bm, self._bn = bm, bn
        (stage,) = self._stages()
        slots, part_names = self._partial_slots(stage, n_split)
        self.counters = row_blocks

        # -- every program: the partials of one chunk of one row block -------------------
        fn = _Fn(self)
        fn.used.update({"pid", "chunk", "rows", "row_mask", "cols", "col_mask", "mask", "k",
                        "done", "sub", "counters", *part_names})
        out = fn.out
        block = (f"block of {bm} kept points, runs of {self.kept_run[0]} padded to "
                 f"{self.kept_run[1]}" if self.kept_run else f"block of {bm} output rows")
        out.append(f"pid = {self._pid(0)}  # {block}")
        if self._reversed():
            out.append(f"chunk = {n_split - 1} - {self._pid(1)}  # chunk of {chunk} reduced "
                       f"elements, of {n_split}: the last first (order=reversed), where the "
                       f"launch before left L2")
        else:
            out.append(f"chunk = {self._pid(1)}  # chunk of {chunk} reduced elements, of "
                       f"{n_split}")
        row_mask = self._open_rows(fn, bm, self.padded_rows)
        col_masked = cols != n_split * chunk or cols == 0
        accs = [self._acc_init(fn, r, bm, bn) for r in stage]
        fn.body = []
        fn.memo_tile = {}
        coords = self._open_tile(fn, f"chunk * {chunk} + k + ", True, col_masked, row_mask)
        for r, acc in zip(stage, accs):
            self._acc_update(fn, r, fn.value(r.args[0], coords), acc)
        self._close_loop(fn, chunk, bn)
        m = f", mask={row_mask}" if row_mask else ""
        at = "chunk + rows" if rows == 1 else f"chunk * {rows} + rows"
        for r, acc in zip(stage, accs):
            vs = self._reduce_tile(fn, r, None, acc, partial=True)
            for part, v in zip(slots[r.name], vs if isinstance(vs, tuple) else (vs,)):
                fn.out.append(f"tl.store({part} + {at}, {v}{m})  # partial of %{r.name}")

        # -- the last program of the row block: combine, epilogue, outputs ----------------
        final_name = f"{self.name}_final"
        g, fbm, final_used = self._split_final(final_name, stage, slots, part_names, n_split)
        call = ", ".join(part_names + [self.ptr_name[i] for i in final_used] + self.out_name)
        out.append("tl.debug_barrier()  # every thread's partials are stored before the count")
        out.append('done = tl.atomic_add(counters + pid, 1, sem="acq_rel")  '
                   "# programs of this row block done before this one")
        out.append(f"if done == {n_split - 1}:  # the last of {n_split}: every partial of its "
                   f"rows is stored")
        first = "pid" if bm == 1 else f"pid * {bm}"
        if fbm < bm:
            out.append(f"    for sub in range(0, {bm}, {fbm}):")
            out.append(f"        {final_name}({first} + sub, {call})")
        else:
            out.append(f"    {final_name}({first}, {call})")
        out.append("    tl.store(counters + pid, 0)  # zero again for the next launch")
        self.tiling = [f"split in one launch: {bm}x{bn} tiles, {num_warps} warps, {row_blocks} "
                       f"row block(s) x {n_split} chunks of {chunk} reduced elements "
                       f"({row_blocks * n_split} programs, to fill the GPU) write partials",
                       f"the last program of each row block (an atomic count) combines its "
                       f"{n_split} partials per row in chunk order, {fbm} row(s) at a time, "
                       f"then the epilogue"]
        if self._reversed():
            self.tiling.append("chunks run last first (order=reversed): the launch before "
                               "streamed through an input, whose end L2 still holds; the "
                               "partials combine in chunk order all the same")
        self._describe_run()
        launch = self._partials_launch(fn, part_names, (row_blocks, n_split, 1), num_warps)
        return [fn, g], [launch]

    def _split_final(self, name: str, stage: list[Instr], slots: dict[str, list[str]],
                     part_names: list[str], n_split: int) -> tuple[_Fn, int, list[int]]:
        """``name(first, partials..., params..., outputs...)``: rows ``first ...`` of a split
        reduction from all their partials, then the epilogue; returns the function, its rows
        per call and the params it reads."""
        rows, bm = self.padded_rows, self._bm
        sb = next_pow2(n_split)
        limit = (1 << 16) if self.target == "interpret" else 4096
        fbm = max(1, min(bm, limit // sb))
        g = _Fn(self)
        g.used.update({"first", *part_names})
        row_mask = self._open_partials(g, "first", fbm, rows % bm != 0, n_split)
        self._combine_partials(g, stage, slots, n_split)
        self._store_row_outputs(g, row_mask)  # (a split reduction yields row values only)
        used = self._used_params(g.out)
        g.source = self._header(name, ["first"] + part_names + [self.ptr_name[i] for i in used]
                                + self.out_name)
        g.source += ["    " + line for line in g.out]
        return g, fbm, used
