"""Gates and moments on LANES amplitudes at a time, written as LLVM vector operations.

numba cannot tell LLVM that a tile's real and imaginary buffers do not overlap, so LLVM vectorises
the kernels' loops behind run-time overlap checks, and a gate whose runs are shorter than its
unrolled vector loop (tile bits 3 to 5) ran one amplitude at a time. These intrinsics load, transform
and store LANES consecutive amplitudes of each buffer as vectors: a gate on tile bit 3 at 0.23 ns an
amplitude against 0.78 ns, complex64 gates at any bit in half the time (one thread, a tile in L1).
Every index given is the first of LANES consecutive ones, all inside the buffers: the caller checks.
Stores into a state may stream past the caches (``stream_lanes``): a strided pass over a 1 GiB state
wrote at a third of copy bandwidth through them, the line of each store read first.
"""

from __future__ import annotations

from llvmlite import ir

from ..simbase.threads import import_numba

numba = import_numba()  # first: a NUMBA_NUM_THREADS numba refuses is a typed error
types = numba.types
cgutils = numba.core.cgutils
intrinsic = numba.extending.intrinsic

LANES = 8  # 64 bytes of float64 or 32 of float32; LLVM splits or packs them as the machine's vectors allow
FAST = ("fast",)
_I32 = ir.IntType(32)


def _pointer(context, builder, array_type, array, index):
    """The vector of LANES elements of ``array`` from ``index`` on."""
    data = context.make_array(array_type)(context, builder, array).data
    element = context.get_data_type(array_type.dtype)
    return builder.bitcast(builder.gep(data, [index], inbounds=True), ir.VectorType(element, LANES).as_pointer())


def _broadcast(builder, value):
    """A vector of LANES copies of a scalar."""
    vector = ir.VectorType(value.type, LANES)
    one = builder.insert_element(ir.Constant(vector, ir.Undefined), value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vector, ir.Undefined), ir.Constant(ir.VectorType(_I32, LANES), [0] * LANES))


def _splat(context, builder, value, value_type, element_type):
    """A vector of LANES copies of a scalar, in the buffers' precision."""
    return _broadcast(builder, context.cast(builder, value, value_type, element_type))


class _Vectors:
    """Loads, stores and arithmetic on the vectors of one intrinsic call."""

    def __init__(self, context, builder, array_type):
        self.context, self.builder, self.array_type = context, builder, array_type
        self.align = array_type.dtype.bitwidth // 8

    def pointer(self, array, index):
        return _pointer(self.context, self.builder, self.array_type, array, index)

    def load(self, pointer):
        return self.builder.load(pointer, align=self.align)

    def store(self, value, pointer):
        self.builder.store(value, pointer, align=self.align)

    def splat(self, value, value_type):
        return _splat(self.context, self.builder, value, value_type, self.array_type.dtype)

    def mul(self, a, b):
        return self.builder.fmul(a, b, flags=FAST)

    def add(self, a, b):
        return self.builder.fadd(a, b, flags=FAST)

    def sub(self, a, b):
        return self.builder.fsub(a, b, flags=FAST)

    def rotate(self, c, s, xr, xi, yr, yi):
        """An RX-shaped gate on (x, y): x, y ← c·x + i·s·y, c·y + i·s·x, as real and imaginary vectors."""
        mul, add, sub = self.mul, self.add, self.sub
        return sub(mul(c, xr), mul(s, yi)), add(mul(c, xi), mul(s, yr)), sub(mul(c, yr), mul(s, xi)), add(mul(c, yi), mul(s, xr))

    def total(self, value):
        """The sum of a vector's lanes, in float64 whatever the buffers' precision."""
        double = ir.DoubleType()
        if value.type.element != double:
            value = self.builder.fpext(value, ir.VectorType(double, LANES))
        function = cgutils.get_or_insert_function(
            self.builder.module, ir.FunctionType(double, [double, value.type]), f"llvm.vector.reduce.fadd.v{LANES}f64"
        )
        return self.builder.call(function, [ir.Constant(double, -0.0), value], fastmath=FAST)


def _is_buffer(array):
    return isinstance(array, types.Array) and isinstance(array.dtype, types.Float) and array.layout == "C"


@intrinsic
def rx_lanes(typingctx, re, im, j, k, c, s):
    """Amplitudes j.. and k.. (LANES each): x, y ← c·x + i·s·y, c·y + i·s·x (an RX-shaped gate)."""
    if not (_is_buffer(re) and re == im):
        return None
    sig = types.void(re, im, j, k, c, s)

    def codegen(context, builder, sig, args):
        re_, im_, j_, k_, c_, s_ = args
        v = _Vectors(context, builder, sig.args[0])
        pointers = v.pointer(re_, j_), v.pointer(im_, j_), v.pointer(re_, k_), v.pointer(im_, k_)
        values = v.rotate(v.splat(c_, sig.args[4]), v.splat(s_, sig.args[5]), *(v.load(p) for p in pointers))
        for value, pointer in zip(values, pointers, strict=True):
            v.store(value, pointer)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def gate_lanes(typingctx, re, im, j, k, m):
    """Amplitudes j.. and k.. (LANES each): (x, y) ← U (x, y), m the real and imaginary parts of
    U's entries, row by row (eight numbers)."""
    if not (_is_buffer(re) and re == im and isinstance(m, types.UniTuple) and m.count == 8):
        return None
    sig = types.void(re, im, j, k, m)

    def codegen(context, builder, sig, args):
        re_, im_, j_, k_, m_ = args
        v = _Vectors(context, builder, sig.args[0])
        u = [v.splat(builder.extract_value(m_, i), sig.args[4].dtype) for i in range(8)]
        pointers = v.pointer(re_, j_), v.pointer(im_, j_), v.pointer(re_, k_), v.pointer(im_, k_)
        xr, xi, yr, yi = (v.load(p) for p in pointers)
        mul, add, sub = v.mul, v.add, v.sub

        def row(a, ai, b, bi):  # (a + i·ai)·x + (b + i·bi)·y
            return (
                add(sub(mul(a, xr), mul(ai, xi)), sub(mul(b, yr), mul(bi, yi))),
                add(add(mul(a, xi), mul(ai, xr)), add(mul(b, yi), mul(bi, yr))),
            )

        values = row(*u[0:4]) + row(*u[4:8])
        for value, pointer in zip(values, pointers, strict=True):
            v.store(value, pointer)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def rx_pair_lanes(typingctx, re, im, a, b, c, d, c1, s1, c2, s2):
    """Quadruples a.., b.., c.., d.. (LANES each; b = a + step1, c = a + step2, d = c + step1): the
    RX-shaped gate (c1, s1) on the step1 pairs, then (c2, s2) on the step2 pairs, each amplitude
    loaded and stored once."""
    if not (_is_buffer(re) and re == im):
        return None
    sig = types.void(re, im, a, b, c, d, c1, s1, c2, s2)

    def codegen(context, builder, sig, args):
        re_, im_ = args[0], args[1]
        v = _Vectors(context, builder, sig.args[0])
        pointers = [(v.pointer(re_, i), v.pointer(im_, i)) for i in args[2:6]]
        (ar, ai), (br, bi), (cr, ci), (dr, di) = [(v.load(r), v.load(i)) for r, i in pointers]
        first = v.splat(args[6], sig.args[6]), v.splat(args[7], sig.args[7])
        second = v.splat(args[8], sig.args[8]), v.splat(args[9], sig.args[9])
        ar, ai, br, bi = v.rotate(*first, ar, ai, br, bi)
        cr, ci, dr, di = v.rotate(*first, cr, ci, dr, di)
        ar, ai, cr, ci = v.rotate(*second, ar, ai, cr, ci)
        br, bi, dr, di = v.rotate(*second, br, bi, dr, di)
        for (r, i), (pr, pi) in zip(((ar, ai), (br, bi), (cr, ci), (dr, di)), pointers, strict=True):
            v.store(r, pr)
            v.store(i, pi)
        return context.get_dummy_value()

    return sig, codegen


def _scaled_rotate(v, k, unit_diagonal, xr, xi, yr, yi):
    """An RX-shaped gate [[c, i·s], [i·s, c]] less the factor of its larger entry, one multiply-add a
    number: x, y ← x + i·k·y, y + i·k·x (``unit_diagonal``: k = s/c) or k·x + i·y, k·y + i·x (k = c/s)."""
    mul, add, sub = v.mul, v.add, v.sub
    if unit_diagonal:
        return sub(xr, mul(k, yi)), add(xi, mul(k, yr)), sub(yr, mul(k, xi)), add(yi, mul(k, xr))
    return sub(mul(k, xr), yi), add(mul(k, xi), yr), sub(mul(k, yr), xi), add(mul(k, yi), xr)


@intrinsic
def rx_pair_scaled_lanes(typingctx, re, im, a, b, c, d, k1, k2, form):
    """As rx_pair_lanes, both gates less their factors (``_scaled_rotate``; ``form``: bit 0 set if the
    first has a unit diagonal, bit 1 the second): half the multiplies. The caller applies the factors."""
    if not (_is_buffer(re) and re == im and isinstance(form, types.Integer)):
        return None
    sig = types.void(re, im, a, b, c, d, k1, k2, form)

    def codegen(context, builder, sig, args):
        re_, im_ = args[0], args[1]
        v = _Vectors(context, builder, sig.args[0])
        pointers = [(v.pointer(re_, i), v.pointer(im_, i)) for i in args[2:6]]
        loaded = [(v.load(r), v.load(i)) for r, i in pointers]
        k1_, k2_ = v.splat(args[6], sig.args[6]), v.splat(args[7], sig.args[7])
        end = builder.append_basic_block("scaled.end")
        switch = builder.switch(args[8], end)
        for form_ in range(4):  # a branch per form, taken the same way for every call of a sweep
            block = builder.append_basic_block(f"scaled.form{form_}")
            switch.add_case(ir.Constant(args[8].type, form_), block)
            with builder.goto_block(block):
                (ar, ai), (br, bi), (cr, ci), (dr, di) = loaded
                ar, ai, br, bi = _scaled_rotate(v, k1_, form_ & 1, ar, ai, br, bi)
                cr, ci, dr, di = _scaled_rotate(v, k1_, form_ & 1, cr, ci, dr, di)
                ar, ai, cr, ci = _scaled_rotate(v, k2_, form_ & 2, ar, ai, cr, ci)
                br, bi, dr, di = _scaled_rotate(v, k2_, form_ & 2, br, bi, dr, di)
                for (r, i), (pr, pi) in zip(((ar, ai), (br, bi), (cr, ci), (dr, di)), pointers, strict=True):
                    v.store(r, pr)
                    v.store(i, pi)
                builder.branch(end)
        builder.position_at_end(end)
        return context.get_dummy_value()

    return sig, codegen


def _moment_terms(v, generator, phi_j, phi_k, lam_j, lam_k):
    """The lanes of Im⟨λ|P|φ⟩ over the pairs (j, k): P = X (1) or Y (2); each a (re, im) vector pair."""
    (pr_j, pi_j), (pr_k, pi_k), (lr_j, li_j), (lr_k, li_k) = phi_j, phi_k, lam_j, lam_k
    mul, add, sub = v.mul, v.add, v.sub
    if generator == 1:  # X φ = (φ_k, φ_j)
        return add(sub(mul(lr_j, pi_k), mul(li_j, pr_k)), sub(mul(lr_k, pi_j), mul(li_k, pr_j)))
    # Y φ = (-i φ_k, i φ_j)
    return sub(add(mul(lr_k, pr_j), mul(li_k, pi_j)), add(mul(lr_j, pr_k), mul(li_j, pi_k)))


def _moment_intrinsic(generator):
    def moment(typingctx, pre, pim, lre, lim, j, k):
        if not (_is_buffer(pre) and pre == pim == lre == lim):
            return None
        sig = types.float64(pre, pim, lre, lim, j, k)

        def codegen(context, builder, sig, args):
            v = _Vectors(context, builder, sig.args[0])
            pre_, pim_, lre_, lim_, j_, k_ = args

            def pair(re, im, index):
                return v.load(v.pointer(re, index)), v.load(v.pointer(im, index))

            terms = _moment_terms(
                v, generator, pair(pre_, pim_, j_), pair(pre_, pim_, k_), pair(lre_, lim_, j_), pair(lre_, lim_, k_)
            )
            return v.total(terms)

        return sig, codegen

    moment.__doc__ = f"Σ over the LANES pairs (j.., k..) of Im⟨λ|{'XY'[generator - 1]}|φ⟩ on their bit, in float64."
    return intrinsic(moment)


x_moment_lanes = _moment_intrinsic(1)
y_moment_lanes = _moment_intrinsic(2)


@intrinsic
def x_moment_pair_sweep(typingctx, pre, pim, lre, lim, step1, step2):
    """The X moments on the step1 pairs and on the step2 pairs (step1 < step2, both at least LANES),
    in float64, over every quadruple a, a + step1, a + step2, a + step1 + step2 of the buffers: one
    loop summing in vector registers (a sum per call of LANES amplitudes cost a third more)."""
    if not (_is_buffer(pre) and pre == pim == lre == lim and step1 == step2 and isinstance(step1, types.Integer)):
        return None
    sig = types.UniTuple(types.float64, 2)(pre, pim, lre, lim, step1, step2)

    def codegen(context, builder, sig, args):
        v = _Vectors(context, builder, sig.args[0])
        pre_, pim_, lre_, lim_, step1_, step2_ = args
        index = step1_.type
        one = ir.Constant(index, 1)
        size = context.make_array(sig.args[0])(context, builder, pre_).nitems
        zero = ir.Constant(ir.VectorType(context.get_data_type(sig.args[0].dtype), LANES), [0.0] * LANES)
        sums = cgutils.alloca_once_value(builder, zero), cgutils.alloca_once_value(builder, zero)
        low, mid = builder.sub(step1_, one), builder.sub(builder.lshr(step2_, one), one)
        quads = builder.lshr(size, ir.Constant(index, 2))
        with cgutils.for_range_slice(builder, ir.Constant(index, 0), quads, step1_) as (q0, _):
            # the quadruple's first amplitude: q0 with zero bits put in at step1 and step2 (kernels._quad_start)
            high_part = builder.shl(builder.and_(q0, builder.not_(mid)), ir.Constant(index, 2))
            mid_part = builder.shl(builder.and_(builder.and_(q0, mid), builder.not_(low)), one)
            start = builder.or_(high_part, mid_part)
            with cgutils.for_range_slice(builder, start, builder.add(start, step1_), ir.Constant(index, LANES)) as (a, _):
                quad = a, builder.add(a, step1_), builder.add(a, step2_), builder.add(builder.add(a, step1_), step2_)
                phi = [(v.load(v.pointer(pre_, i)), v.load(v.pointer(pim_, i))) for i in quad]
                lam = [(v.load(v.pointer(lre_, i)), v.load(v.pointer(lim_, i))) for i in quad]
                first = v.add(
                    _moment_terms(v, 1, phi[0], phi[1], lam[0], lam[1]), _moment_terms(v, 1, phi[2], phi[3], lam[2], lam[3])
                )
                second = v.add(
                    _moment_terms(v, 1, phi[0], phi[2], lam[0], lam[2]), _moment_terms(v, 1, phi[1], phi[3], lam[1], lam[3])
                )
                for total, term in zip(sums, (first, second), strict=True):
                    builder.store(v.add(builder.load(total), term), total)
        return context.make_tuple(builder, sig.return_type, [v.total(builder.load(total)) for total in sums])

    return sig, codegen


def _is_state(psi, buffer):
    return (
        isinstance(psi, types.Array)
        and isinstance(psi.dtype, types.Complex)
        and psi.dtype.underlying_float == buffer.dtype
        and psi.layout == "C"
    )


def _interleaved_pointer(context, builder, state_type, state, index):
    """LANES complex amplitudes of ``state`` from ``index`` on, as one vector of 2·LANES real numbers."""
    data = context.make_array(state_type)(context, builder, state).data
    element = context.get_data_type(state_type.dtype.underlying_float)
    return builder.bitcast(builder.gep(data, [index], inbounds=True), ir.VectorType(element, 2 * LANES).as_pointer())


_EVEN = ir.Constant(ir.VectorType(_I32, LANES), list(range(0, 2 * LANES, 2)))
_ODD = ir.Constant(ir.VectorType(_I32, LANES), list(range(1, 2 * LANES, 2)))
_INTERLEAVE = ir.Constant(ir.VectorType(_I32, 2 * LANES), [i // 2 + (i % 2) * LANES for i in range(2 * LANES)])


@intrinsic
def split_lanes(typingctx, re, im, row, psi, start):
    """re[row..], im[row..] ← the real and imaginary parts of psi[start..] (LANES amplitudes)."""
    if not (_is_buffer(re) and re == im and _is_state(psi, re)):
        return None
    sig = types.void(re, im, row, psi, start)

    def codegen(context, builder, sig, args):
        re_, im_, row_, psi_, start_ = args
        v = _Vectors(context, builder, sig.args[0])
        pair = v.load(_interleaved_pointer(context, builder, sig.args[3], psi_, start_))
        v.store(builder.shuffle_vector(pair, pair, _EVEN), v.pointer(re_, row_))
        v.store(builder.shuffle_vector(pair, pair, _ODD), v.pointer(im_, row_))
        return context.get_dummy_value()

    return sig, codegen


STREAM_ALIGN = 64  # bytes: a streaming store writes whole, aligned vectors


def _store_to_state(v, builder, value, pointer, streaming):
    """Store LANES amplitudes into a state; ``streaming``: past the caches (a non-temporal store, no
    read of the line first), at a STREAM_ALIGN-aligned address the caller guarantees."""
    if not streaming:
        v.store(value, pointer)
        return
    store = builder.store(value, pointer, align=STREAM_ALIGN)
    store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(_I32, 1)]))


def _join(streaming):
    @intrinsic
    def join(typingctx, re, im, row, psi, start):
        if not (_is_buffer(re) and re == im and _is_state(psi, re)):
            return None
        sig = types.void(re, im, row, psi, start)

        def codegen(context, builder, sig, args):
            re_, im_, row_, psi_, start_ = args
            v = _Vectors(context, builder, sig.args[0])
            pair = builder.shuffle_vector(v.load(v.pointer(re_, row_)), v.load(v.pointer(im_, row_)), _INTERLEAVE)
            _store_to_state(v, builder, pair, _interleaved_pointer(context, builder, sig.args[3], psi_, start_), streaming)
            return context.get_dummy_value()

        return sig, codegen

    return join


join_lanes = _join(False)
join_lanes.__doc__ = """psi[start..] ← re[row..] + i·im[row..] (LANES amplitudes)."""
stream_lanes = _join(True)
stream_lanes.__doc__ = """join_lanes past the caches: psi's data and ``start`` at STREAM_ALIGN bytes."""


@intrinsic
def store_fence(typingctx):
    """Make the streaming stores before it visible ahead of every later access (they are weakly
    ordered; a full fence drains them on x86 and orders them elsewhere)."""
    sig = types.void()

    def codegen(context, builder, sig, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return sig, codegen


def _transpose(builder, rows):
    """The LANES x LANES transpose of LANES vectors (rows), by swapping blocks of 4, 2 and 1 lanes."""
    rows = list(rows)
    d = LANES // 2
    while d:
        low = ir.Constant(ir.VectorType(_I32, LANES), [lane if not lane & d else LANES + lane - d for lane in range(LANES)])
        high = ir.Constant(ir.VectorType(_I32, LANES), [lane + d if not lane & d else LANES + lane for lane in range(LANES)])
        for i in range(LANES):
            if not i & d:
                rows[i], rows[i + d] = (
                    builder.shuffle_vector(rows[i], rows[i + d], low),
                    builder.shuffle_vector(rows[i], rows[i + d], high),
                )
        d //= 2
    return rows


def _index(builder, first, stride, i):
    return builder.add(first, builder.mul(stride, ir.Constant(stride.type, i)))


@intrinsic
def split_transposed_lanes(typingctx, re, im, row, row_stride, psi, start, run_stride):
    """A LANES x LANES block of amplitudes, transposed into split buffers: re/im[row + j·row_stride + r]
    ← psi[start + r·run_stride + j] for r, j < LANES."""
    if not (_is_buffer(re) and re == im and _is_state(psi, re)):
        return None
    sig = types.void(re, im, row, row_stride, psi, start, run_stride)

    def codegen(context, builder, sig, args):
        re_, im_, row_, row_stride_, psi_, start_, run_stride_ = args
        v = _Vectors(context, builder, sig.args[0])
        runs = [
            v.load(_interleaved_pointer(context, builder, sig.args[4], psi_, _index(builder, start_, run_stride_, r)))
            for r in range(LANES)
        ]
        for part, lanes in ((re_, _EVEN), (im_, _ODD)):
            columns = _transpose(builder, [builder.shuffle_vector(run, run, lanes) for run in runs])
            for j, column in enumerate(columns):
                v.store(column, v.pointer(part, _index(builder, row_, row_stride_, j)))
        return context.get_dummy_value()

    return sig, codegen


def _join_transposed(streaming):
    @intrinsic
    def join_transposed(typingctx, re, im, row, row_stride, psi, start, run_stride):
        if not (_is_buffer(re) and re == im and _is_state(psi, re)):
            return None
        sig = types.void(re, im, row, row_stride, psi, start, run_stride)

        def codegen(context, builder, sig, args):
            re_, im_, row_, row_stride_, psi_, start_, run_stride_ = args
            v = _Vectors(context, builder, sig.args[0])
            parts = [
                _transpose(builder, [v.load(v.pointer(part, _index(builder, row_, row_stride_, j))) for j in range(LANES)])
                for part in (re_, im_)
            ]
            for r in range(LANES):
                pair = builder.shuffle_vector(parts[0][r], parts[1][r], _INTERLEAVE)
                pointer = _interleaved_pointer(context, builder, sig.args[4], psi_, _index(builder, start_, run_stride_, r))
                _store_to_state(v, builder, pair, pointer, streaming)
            return context.get_dummy_value()

        return sig, codegen

    return join_transposed


join_transposed_lanes = _join_transposed(False)
join_transposed_lanes.__doc__ = (
    """The inverse of split_transposed_lanes: psi[start + r·run_stride + j] ← re/im[row + j·row_stride + r]."""
)
stream_transposed_lanes = _join_transposed(True)
stream_transposed_lanes.__doc__ = """join_transposed_lanes past the caches (as stream_lanes)."""


def _table_lanes(context, builder, table_type, table, levels, element_type):
    """(real, imaginary) vectors of table[levels[l]] for the LANES levels (a vector of integers), gathered."""
    data = context.make_array(table_type)(context, builder, table).data
    real = context.get_data_type(table_type.dtype.underlying_float)
    size = table_type.dtype.underlying_float.bitwidth // 8
    i64 = ir.IntType(64)
    wide = ir.VectorType(i64, LANES)
    offsets = builder.mul(builder.zext(levels, wide), ir.Constant(wide, [2 * size] * LANES))
    start = builder.ptrtoint(data, i64)
    pointer_vector = ir.VectorType(real.as_pointer(), LANES)
    vector = ir.VectorType(real, LANES)
    gather = cgutils.get_or_insert_function(
        builder.module,
        ir.FunctionType(vector, [pointer_vector, _I32, ir.VectorType(ir.IntType(1), LANES), vector]),
        f"llvm.masked.gather.v{LANES}f{8 * size}.v{LANES}p0",
    )
    everything = ir.Constant(ir.VectorType(ir.IntType(1), LANES), [1] * LANES)
    parts = []
    for part in (0, 1):
        addresses = builder.add(builder.add(_broadcast(builder, start), offsets), ir.Constant(wide, [part * size] * LANES))
        pointers = builder.inttoptr(addresses, pointer_vector)
        values = builder.call(gather, [pointers, ir.Constant(_I32, size), everything, ir.Constant(vector, ir.Undefined)])
        if table_type.dtype.underlying_float != element_type:
            target = ir.VectorType(context.get_data_type(element_type), LANES)
            values = builder.fptrunc(values, target) if size == 8 else builder.fpext(values, target)
        parts.append(values)
    return parts


def _levels_vector(context, builder, levels_type, levels, index):
    """The LANES entries of an array of levels (or values) from ``index`` on, as one vector."""
    return builder.load(_pointer(context, builder, levels_type, levels, index), align=levels_type.dtype.bitwidth // 8)


def _is_levels(levels):
    return (
        isinstance(levels, types.Array)
        and isinstance(levels.dtype, types.Integer)
        and not levels.dtype.signed
        and levels.layout == "C"
    )


@intrinsic
def phase_by_level_lanes(typingctx, re, im, j, levels, phases):
    """re/im[j..] *= phases[levels[j..]] (LANES amplitudes; every level an index of ``phases``)."""
    if not (
        _is_buffer(re)
        and re == im
        and _is_levels(levels)
        and isinstance(phases, types.Array)
        and isinstance(phases.dtype, types.Complex)
    ):
        return None
    sig = types.void(re, im, j, levels, phases)

    def codegen(context, builder, sig, args):
        re_, im_, j_, levels_, phases_ = args
        v = _Vectors(context, builder, sig.args[0])
        level = _levels_vector(context, builder, sig.args[3], levels_, j_)
        pr, pi = _table_lanes(context, builder, sig.args[4], phases_, level, sig.args[0].dtype)
        pointers = v.pointer(re_, j_), v.pointer(im_, j_)
        xr, xi = v.load(pointers[0]), v.load(pointers[1])
        v.store(v.sub(v.mul(xr, pr), v.mul(xi, pi)), pointers[0])
        v.store(v.add(v.mul(xr, pi), v.mul(xi, pr)), pointers[1])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def level_sums_lanes(typingctx, pre, pim, lre, lim, values):
    """(Σ q, Σ q·values) over the buffers' first LANES·⌊size/LANES⌋ amplitudes, q = Im(conj(λ) φ),
    summed in float64 vectors (``values``: unsigned levels or a diagonal's float values)."""
    numeric = isinstance(values, types.Array) and values.layout == "C" and isinstance(values.dtype, (types.Float, types.Integer))
    if not (_is_buffer(pre) and pre == pim == lre == lim and numeric and not getattr(values.dtype, "signed", False)):
        return None
    sig = types.UniTuple(types.float64, 2)(pre, pim, lre, lim, values)

    def codegen(context, builder, sig, args):
        pre_, pim_, lre_, lim_, values_ = args
        v = _Vectors(context, builder, sig.args[0])
        double = ir.VectorType(ir.DoubleType(), LANES)
        sums = [cgutils.alloca_once_value(builder, ir.Constant(double, [0.0] * LANES)) for _ in range(2)]
        count = context.make_array(sig.args[0])(context, builder, pre_).nitems
        with cgutils.for_range(builder, builder.udiv(count, ir.Constant(count.type, LANES))) as loop:
            j = builder.mul(loop.index, ir.Constant(count.type, LANES))
            pr, pi, lr, li = (v.load(v.pointer(a, j)) for a in (pre_, pim_, lre_, lim_))
            q = v.sub(v.mul(lr, pi), v.mul(li, pr))
            q = q if q.type == double else builder.fpext(q, double)
            value = _levels_vector(context, builder, sig.args[4], values_, j)
            if isinstance(sig.args[4].dtype, types.Integer):
                value = builder.uitofp(value, double)
            elif value.type != double:
                value = builder.fpext(value, double)
            for total, term in zip(sums, (q, v.mul(q, value)), strict=True):
                builder.store(v.add(builder.load(total), term), total)
        return context.make_tuple(builder, sig.return_type, [v.total(builder.load(total)) for total in sums])

    return sig, codegen
