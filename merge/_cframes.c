/* merge._cframes: the per-row steps of merge.frames' ORDER BY merge, in C.
 *
 * Why: a raw ORDER BY merge over text keys spends its time in a handful of byte operations per row (find the
 * weight column, check its prefix and units, slice it; cut the hidden columns off the frame), each a Python-level
 * call: together they are most of such a merge's cost per row, where the nodes' rows themselves cost the proxy
 * nothing to relay. These
 * functions do the same steps for the usual rows in one C call; every other row (a NULL weight, long values,
 * malformed bytes, a frame of 16 MB, weights that need the padded encoding) goes to the Python fallback passed in,
 * which computes the same answer (tests/merge/test_cframes.py compares both over generated rows). The Python
 * module stays the definition: this file only mirrors the common case of merge.frames and merge.weights.
 *
 * Every function is called through functools.partial with its fixed arguments first and (out,) run, a, b last.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_PAYLOAD 0xFFFFFF

static PyObject *str_fast; /* "_fast": WeightDecoder's learned parameters of its usual case (or None) */
static PyObject *str_order_at;

static int
read_run(PyObject *obj, const unsigned char **buf, Py_ssize_t *len)
{
    if (!PyBytes_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "run must be bytes");
        return -1;
    }
    *buf = (const unsigned char *)PyBytes_AS_STRING(obj);
    *len = PyBytes_GET_SIZE(obj);
    return 0;
}

static PyObject *
call3(PyObject *fn, PyObject *const *args)
{
    return PyObject_Vectorcall(fn, args, 3, NULL);
}

/* The order key of the short-form weight value run[ws:we] (merge.weights.WeightDecoder.order_at's usual case), or
 * NULL with no error set when the decoder's Python code must decide. */
static PyObject *
fast_order(PyObject *decoder, const unsigned char *run, Py_ssize_t ws, Py_ssize_t we)
{
    PyObject *fast = PyObject_GetAttr(decoder, str_fast);
    if (fast == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    /* (short, tag, cut, space, unit, space_at, limit, end) */
    if (PyTuple_Check(fast) && PyTuple_GET_SIZE(fast) == 8) {
        PyObject *shortp = PyTuple_GET_ITEM(fast, 0), *spacep = PyTuple_GET_ITEM(fast, 3);
        PyObject *endp = PyTuple_GET_ITEM(fast, 7);
        Py_ssize_t tag = PyLong_AsSsize_t(PyTuple_GET_ITEM(fast, 1));
        Py_ssize_t cut = PyLong_AsSsize_t(PyTuple_GET_ITEM(fast, 2));
        Py_ssize_t unit = PyLong_AsSsize_t(PyTuple_GET_ITEM(fast, 4));
        Py_ssize_t space_at = PyLong_AsSsize_t(PyTuple_GET_ITEM(fast, 5));
        long limit = PyLong_AsLong(PyTuple_GET_ITEM(fast, 6));
        if (PyErr_Occurred() || !PyBytes_Check(shortp) || !PyBytes_Check(spacep) || !PyBytes_Check(endp)
                || unit != PyBytes_GET_SIZE(spacep) || unit < 1 || space_at < 0 || space_at >= unit
                || tag != PyBytes_GET_SIZE(shortp) - 1) {
            Py_DECREF(fast);
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "WeightDecoder._fast is malformed");
            }
            return NULL;
        }
        Py_ssize_t ns = PyBytes_GET_SIZE(shortp);
        if (we - ws >= ns && memcmp(run + ws, PyBytes_AS_STRING(shortp), (size_t)ns) == 0) {
            Py_ssize_t t = ws + tag, s = t + 1;
            if (cut && we - s > cut) {
                we = s + cut;
            }
            const unsigned char *space = (const unsigned char *)PyBytes_AS_STRING(spacep);
            /* merge.weights._orderer_at: not whole units (a cut key) as they are; else trailing space units dropped
             * (a CHAR column's weights are padded to its length) and, when no unit is below the space, as they are */
            int usual = (we - s) % unit != 0;
            if (!usual) {
                while (we - s >= unit && memcmp(run + we - unit, space, (size_t)unit) == 0) {
                    we -= unit;
                }
                Py_ssize_t i;
                for (i = s + space_at; i < we; i += unit) {
                    if (run[i] < limit) {
                        break;
                    }
                }
                usual = i >= we;
            }
            if (usual) {
                Py_ssize_t ne = PyBytes_GET_SIZE(endp);
                result = PyBytes_FromStringAndSize(NULL, we - t + ne);
                if (result != NULL) {
                    char *dst = PyBytes_AS_STRING(result);
                    memcpy(dst, run + t, (size_t)(we - t));
                    memcpy(dst + (we - t), PyBytes_AS_STRING(endp), (size_t)ne);
                }
                Py_DECREF(fast);
                return result;
            }
        }
    }
    Py_DECREF(fast);
    return NULL;
}

/* The decoder's own (Python) order_at(run, ws, we). */
static PyObject *
slow_order(PyObject *decoder, PyObject *runobj, Py_ssize_t ws, Py_ssize_t we)
{
    PyObject *a = PyLong_FromSsize_t(ws), *b = PyLong_FromSsize_t(we);
    PyObject *result = NULL;
    if (a != NULL && b != NULL) {
        result = PyObject_CallMethodObjArgs(decoder, str_order_at, runobj, a, b, NULL);
    }
    Py_XDECREF(a);
    Py_XDECREF(b);
    return result;
}

static PyObject *
weighted_order(PyObject *decoder, PyObject *runobj, const unsigned char *run, Py_ssize_t ws, Py_ssize_t we)
{
    PyObject *key = fast_order(decoder, run, ws, we);
    if (key != NULL || PyErr_Occurred()) {
        return key;
    }
    return slow_order(decoder, runobj, ws, we);
}

/* Where the length-encoded value at run[pos] (with a one- or three-byte length) starts and stops, when it ends by
 * `end`; 0 otherwise (merge.frames._short_value_at). */
static int
short_value_at(const unsigned char *run, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t *ws, Py_ssize_t *we)
{
    if (pos >= end) {
        return 0;
    }
    unsigned char first = run[pos];
    if (first < 0xFB) {
        *ws = pos + 1;
        *we = *ws + first;
    }
    else if (first == 0xFC) {
        if (pos + 3 > end) {
            return 0;
        }
        *ws = pos + 3;
        *we = *ws + (run[pos + 1] | (run[pos + 2] << 8));
    }
    else {
        return 0;
    }
    return *we <= end;
}

/* The row a call reads: run[a:b], from the call's (run, a, b) arguments at `rab`; 1 when it is a frame this file reads
 * (at least `min` bytes, less than 16 MB, inside the run), 0 when the caller's Python step must decide, -1 on an
 * error. */
static int
row_frame(PyObject *const *rab, const unsigned char **run, Py_ssize_t *a, Py_ssize_t *b, Py_ssize_t min)
{
    Py_ssize_t len;
    *a = PyLong_AsSsize_t(rab[1]);
    *b = PyLong_AsSsize_t(rab[2]);
    if (PyErr_Occurred() || read_run(rab[0], run, &len) < 0) {
        return -1;
    }
    return !(*a < 0 || *b > len || *b - *a < min || *b - *a - 4 >= MAX_PAYLOAD);
}

/* Where value `count` of the text row whose values start at run[pos] (and end by `b`) starts: the values before it
 * stepped over when their lengths take one byte. -1: one does not (a longer value, a malformed row: the caller's
 * Python key decides); -2: value `null_index` among them is NULL. */
static Py_ssize_t
step_text(const unsigned char *run, Py_ssize_t pos, Py_ssize_t b, Py_ssize_t count, Py_ssize_t null_index)
{
    for (Py_ssize_t i = 0; i < count; i++) {
        if (pos >= b) {
            return -1;
        }
        unsigned char first = run[pos];
        if (first < 0xFB) {
            pos += 1 + first;
        }
        else if (first == 0xFB) {
            if (i == null_index) {
                return -2;
            }
            pos += 1;
        }
        else {
            return -1;
        }
    }
    return pos < b ? pos : -1;
}

/* Where the values of the binary row framed at run[a:b] (of `columns` columns) start, after its 0x00 and NULL bitmap;
 * -1 when it does not start so or its bitmap runs past `b` (the caller's Python step decides). */
static Py_ssize_t
binary_values_at(const unsigned char *run, Py_ssize_t a, Py_ssize_t b, Py_ssize_t columns)
{
    Py_ssize_t values = a + 5 + (columns + 9) / 8;
    return run[a + 4] != 0 || values > b ? -1 : values;
}

/* text_order_key(index, wi, decoder, general, run, a, b): merge.frames._weighted_order_key's key. */
static PyObject *
text_order_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "text_order_key takes 7 arguments");
        return NULL;
    }
    Py_ssize_t index = PyLong_AsSsize_t(args[0]), wi = PyLong_AsSsize_t(args[1]), a, b;
    const unsigned char *run;
    if (PyErr_Occurred()) {
        return NULL;
    }
    int usual = row_frame(args + 4, &run, &a, &b, 4);
    if (usual <= 0) {
        return usual < 0 ? NULL : call3(args[3], args + 4);
    }
    Py_ssize_t pos = step_text(run, a + 4, b, wi, index), ws, we;
    if (pos == -2) {
        return PyBytes_FromStringAndSize(NULL, 0);
    }
    if (pos < 0 || !short_value_at(run, pos, b, &ws, &we)) {
        return call3(args[3], args + 4);
    }
    return weighted_order(args[2], args[4], run, ws, we);
}

/* binary_order_key(index, wi, columns, decoder, general, run, a, b): merge.frames._weighted_binary_order_key's. */
static PyObject *
binary_order_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "binary_order_key takes 8 arguments");
        return NULL;
    }
    Py_ssize_t index = PyLong_AsSsize_t(args[0]), wi = PyLong_AsSsize_t(args[1]), a, b;
    Py_ssize_t columns = PyLong_AsSsize_t(args[2]);
    const unsigned char *run;
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyObject *general = args[4];
    int usual = row_frame(args + 5, &run, &a, &b, 5);
    if (usual <= 0) {
        return usual < 0 ? NULL : call3(general, args + 5);
    }
    Py_ssize_t bitmap = a + 5, values = binary_values_at(run, a, b, columns);
    if (values < 0) {
        return call3(general, args + 5);
    }
    Py_ssize_t pos = values;
    for (Py_ssize_t i = 0; i < wi; i++) {
        Py_ssize_t bit = i + 2;
        if (run[bitmap + (bit >> 3)] & (1 << (bit & 7))) {
            if (i == index) {
                return PyBytes_FromStringAndSize(NULL, 0);
            }
            continue;
        }
        if (pos >= b || run[pos] >= 0xFB) {
            return call3(general, args + 5);
        }
        pos += 1 + run[pos];
    }
    Py_ssize_t bit = wi + 2;
    Py_ssize_t ws, we;
    if ((run[bitmap + (bit >> 3)] & (1 << (bit & 7))) || pos >= b || !short_value_at(run, pos, b, &ws, &we)) {
        return call3(general, args + 5);
    }
    return weighted_order(args[3], args[5], run, ws, we);
}

/* text_int_key(index, descending, null, general, run, a, b): the key of one integer sort column of a text row
 * (merge.frames' `numeric` key of an integer column): its value (negated DESC), `null` for NULL; values of more than 18
 * digits, long rows and anything unusual go to `general`. */
static PyObject *
text_int_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "text_int_key takes 7 arguments");
        return NULL;
    }
    Py_ssize_t index = PyLong_AsSsize_t(args[0]), a, b;
    int descending = PyObject_IsTrue(args[1]);
    const unsigned char *run;
    if (descending < 0 || PyErr_Occurred()) {
        return NULL;
    }
    PyObject *general = args[3];
    int usual = row_frame(args + 4, &run, &a, &b, 4);
    if (usual <= 0) {
        return usual < 0 ? NULL : call3(general, args + 4);
    }
    Py_ssize_t pos = step_text(run, a + 4, b, index, -1);
    if (pos < 0) {
        return call3(general, args + 4);
    }
    unsigned char n = run[pos];
    if (n == 0xFB) {
        Py_INCREF(args[2]);
        return args[2];
    }
    Py_ssize_t p = pos + 1, end = pos + 1 + n;
    if (n >= 0xFB || end > b || n == 0) {
        return call3(general, args + 4);
    }
    int negative = run[p] == '-';
    if (negative) {
        p++;
    }
    if (end - p < 1 || end - p > 18) {
        return call3(general, args + 4);
    }
    long long value = 0;
    for (; p < end; p++) {
        unsigned char d = run[p];
        if (d < '0' || d > '9') {
            return call3(general, args + 4);
        }
        value = value * 10 + (d - '0');
    }
    if (negative != descending) {
        value = -value;
    }
    return PyLong_FromLongLong(value);
}

/* Append the frame header of an n-byte payload (sequence id 0: the relay renumbers) and run[p:p + n] to out. */
static int
append_frame(PyObject *out, const unsigned char *head, Py_ssize_t nhead, const unsigned char *body, Py_ssize_t nbody)
{
    Py_ssize_t n = nhead + nbody;
    Py_ssize_t at = PyByteArray_GET_SIZE(out);
    if (PyByteArray_Resize(out, at + 4 + n) < 0) {
        return -1;
    }
    unsigned char *dst = (unsigned char *)PyByteArray_AS_STRING(out) + at;
    dst[0] = (unsigned char)(n & 0xFF);
    dst[1] = (unsigned char)((n >> 8) & 0xFF);
    dst[2] = (unsigned char)(n >> 16);
    dst[3] = 0;
    if (nhead) {
        memcpy(dst + 4, head, (size_t)nhead);
    }
    memcpy(dst + 4 + nhead, body, (size_t)nbody);
    return 0;
}

static PyObject *
fallback4(PyObject *fn, PyObject *const *args)
{
    PyObject *r = PyObject_Vectorcall(fn, args, 4, NULL);
    if (r == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* text_cut(cut, fallback, out, run, a, b): append the text row framed at run[a:b] with its first `cut` values only
 * (merge.frames._append_cut's usual case). */
static PyObject *
text_cut(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "text_cut takes 6 arguments");
        return NULL;
    }
    Py_ssize_t cut = PyLong_AsSsize_t(args[0]), a, b;
    const unsigned char *run;
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (!PyByteArray_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "out must be a bytearray");
        return NULL;
    }
    int usual = row_frame(args + 3, &run, &a, &b, 4);
    if (usual <= 0) {
        return usual < 0 ? NULL : fallback4(args[1], args + 2);
    }
    Py_ssize_t pos = a + 4;
    for (Py_ssize_t i = 0; i < cut; i++) {
        if (pos >= b) {
            return fallback4(args[1], args + 2);
        }
        unsigned char first = run[pos];
        if (first < 0xFB) {
            pos += 1 + first;
        }
        else if (first == 0xFB) {
            pos += 1;
        }
        else if (first == 0xFC && pos + 3 <= b) {
            pos += 3 + (run[pos + 1] | (run[pos + 2] << 8));
        }
        else if (first == 0xFD && pos + 4 <= b) {
            pos += 4 + (run[pos + 1] | (run[pos + 2] << 8) | (run[pos + 3] << 16));
        }
        else {
            return fallback4(args[1], args + 2);
        }
        if (pos > b) {
            return fallback4(args[1], args + 2);
        }
    }
    if (append_frame(args[2], NULL, 0, run + a + 4, pos - a - 4) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* binary_cut(sizes, cut, columns, fallback, out, run, a, b): the binary row framed at run[a:b] (of `columns`
 * columns) with its first `cut` values and their NULL bits only (merge.frames._cutter's binary case). `sizes`: per
 * kept column, merge.frames._BINARY_SIZE + 3 as one byte (0: NULL type, 1: length-encoded, 2: one length byte,
 * 3 + n: n fixed bytes). */
static PyObject *
binary_cut(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "binary_cut takes 8 arguments");
        return NULL;
    }
    if (!PyBytes_Check(args[0]) || !PyByteArray_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "sizes must be bytes and out a bytearray");
        return NULL;
    }
    Py_ssize_t cut = PyLong_AsSsize_t(args[1]), columns = PyLong_AsSsize_t(args[2]), a, b;
    const unsigned char *run;
    if (PyErr_Occurred()) {
        return NULL;
    }
    const unsigned char *sizes = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    if (PyBytes_GET_SIZE(args[0]) < cut || cut < 0 || cut > columns) {
        PyErr_SetString(PyExc_ValueError, "binary_cut: sizes shorter than the cut");
        return NULL;
    }
    int usual = row_frame(args + 5, &run, &a, &b, 5);
    if (usual <= 0) {
        return usual < 0 ? NULL : fallback4(args[3], args + 4);
    }
    Py_ssize_t bitmap_out = (cut + 9) / 8, bitmap = a + 5, values = binary_values_at(run, a, b, columns);
    if (values < 0) {
        return fallback4(args[3], args + 4);
    }
    Py_ssize_t p = values;
    for (Py_ssize_t i = 0; i < cut; i++) {
        Py_ssize_t bit = i + 2;
        if (run[bitmap + (bit >> 3)] & (1 << (bit & 7))) {
            continue;
        }
        int size = (int)sizes[i] - 3;
        if (size >= 0) {
            p += size;
        }
        else if (size == -3) {
            continue;
        }
        else if (p < b && (size == -1 || run[p] < 0xFB)) {
            p += 1 + run[p];
        }
        else {
            return fallback4(args[3], args + 4);
        }
    }
    Py_ssize_t n = 1 + bitmap_out + p - values;
    if (p > b || n >= MAX_PAYLOAD) {
        return fallback4(args[3], args + 4);
    }
    unsigned char head[1 + 32];
    if (bitmap_out > 32) {
        return fallback4(args[3], args + 4);
    }
    memcpy(head, run + a + 4, (size_t)(1 + bitmap_out));
    Py_ssize_t used = cut + 2 - 8 * (bitmap_out - 1); /* bits of the last bitmap byte that belong to kept columns */
    if (used < 8) {
        head[bitmap_out] &= (unsigned char)((1 << used) - 1);
    }
    if (append_frame(args[4], head, 1 + bitmap_out, run + values, p - values) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* merge_loop(merger, out, out_bytes, frame_end, unordered): FrameMerger.merge's loop for a merger with no DISTINCT
 * or a `tied` one, in C: the same steps on the merger's heap, runs, key, cutter, check, skip, left and rows (read from
 * it and written back, on errors too), calling its key and cutter and heapq.heapreplace as the Python loop does. Returns what merge
 * returns: the stream whose next run is needed (also set as merger.waiting), FULL (-1) or DONE (-2). `frame_end`:
 * merge.frames.frame_end (rows of 16 MB and more); `unordered`: makes the error of a stream out of the weights'
 * order. */
static PyObject *heapreplace_fn;
static PyObject *str_heap, *str_runs, *str_key, *str_cutter, *str_check, *str_skip, *str_left, *str_rows,
    *str_waiting, *str_tied, *str_seen, *str_group, *str_first_of_group;

/* `tied` DISTINCT: whether the row at run[a:b] with sort key k is the first of its DISTINCT key
 * (FrameMerger._first_of_group; its usual case, a row that starts a new tie group while no DISTINCT keys are kept, in
 * C): 1, 0, or -1 with an error set. */
static int
first_of_group(PyObject *merger, PyObject *seen, PyObject *k, PyObject *run, PyObject *aobj, PyObject *bobj)
{
    PyObject *group = PyObject_GetAttr(merger, str_group);
    if (group == NULL) {
        return -1;
    }
    int fresh = 1;
    if (group != Py_None) {
        if (!PyTuple_Check(group) || PyTuple_GET_SIZE(group) != 4) {
            Py_DECREF(group);
            PyErr_SetString(PyExc_TypeError, "merger.group is (key, run, start, end)");
            return -1;
        }
        fresh = PyObject_RichCompareBool(PyTuple_GET_ITEM(group, 0), k, Py_NE);
    }
    Py_DECREF(group);
    if (fresh < 0) {
        return -1;
    }
    if (fresh && PySet_Check(seen) && PySet_GET_SIZE(seen) == 0) {
        PyObject *g = PyTuple_Pack(4, k, run, aobj, bobj);
        if (g == NULL) {
            return -1;
        }
        int r = PyObject_SetAttr(merger, str_group, g);
        Py_DECREF(g);
        return r < 0 ? -1 : 1;
    }
    PyObject *r = PyObject_CallMethodObjArgs(merger, str_first_of_group, k, run, aobj, bobj, NULL);
    if (r == NULL) {
        return -1;
    }
    int first = PyObject_IsTrue(r);
    Py_DECREF(r);
    return first;
}

static int
get_ssize(PyObject *obj, PyObject *name, Py_ssize_t *value)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        return -1;
    }
    *value = PyLong_AsSsize_t(v);
    Py_DECREF(v);
    return (*value == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* A count (OFFSET rows still to skip, LIMIT rows still to send) as a Py_ssize_t: one beyond it (LIMIT 2990,
 * 18446744073709551615) is counted down from PY_SSIZE_T_MAX, which no merge reaches, and written back as the original
 * less what was counted (`big` keeps the original). */
static int
get_count(PyObject *obj, PyObject *name, Py_ssize_t *value, PyObject **big)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        return -1;
    }
    *value = PyLong_AsSsize_t(v);
    if (*value == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            Py_DECREF(v);
            return -1;
        }
        PyErr_Clear();
        PyObject *zero = PyLong_FromLong(0);
        int negative = zero == NULL ? -1 : PyObject_RichCompareBool(v, zero, Py_LT);
        Py_XDECREF(zero);
        if (negative != 0) {
            if (negative > 0) {
                PyErr_SetString(PyExc_OverflowError, "a count below -1");
            }
            Py_DECREF(v);
            return -1;
        }
        PyErr_Clear();
        *value = PY_SSIZE_T_MAX;
        *big = v;
        return 0;
    }
    Py_DECREF(v);
    return 0;
}

static int
set_count(PyObject *obj, PyObject *name, Py_ssize_t value, PyObject *big)
{
    if (big == NULL) {
        PyObject *v = PyLong_FromSsize_t(value);
        if (v == NULL) {
            return -1;
        }
        int r = PyObject_SetAttr(obj, name, v);
        Py_DECREF(v);
        return r;
    }
    PyObject *counted = PyLong_FromSsize_t(PY_SSIZE_T_MAX - value);
    PyObject *v = counted == NULL ? NULL : PyNumber_Subtract(big, counted);
    Py_XDECREF(counted);
    if (v == NULL) {
        return -1;
    }
    int r = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return r;
}

static int
set_ssize(PyObject *obj, PyObject *name, Py_ssize_t value)
{
    PyObject *v = PyLong_FromSsize_t(value);
    if (v == NULL) {
        return -1;
    }
    int r = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return r;
}

static PyObject *
merge_loop(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "merge_loop takes 5 arguments");
        return NULL;
    }
    PyObject *merger = args[0], *out = args[1], *frame_end = args[3], *unordered = args[4];
    Py_ssize_t out_bytes = PyLong_AsSsize_t(args[2]);
    if (out_bytes == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyByteArray_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "out must be a bytearray");
        return NULL;
    }
    Py_ssize_t skip, left, rows;
    PyObject *skip_big = NULL, *left_big = NULL;
    if (get_count(merger, str_skip, &skip, &skip_big) < 0 || get_count(merger, str_left, &left, &left_big) < 0
            || get_ssize(merger, str_rows, &rows) < 0) {
        Py_XDECREF(skip_big);
        Py_XDECREF(left_big);
        return NULL;
    }
    PyObject *heap = PyObject_GetAttr(merger, str_heap);
    PyObject *runs = PyObject_GetAttr(merger, str_runs);
    PyObject *key = PyObject_GetAttr(merger, str_key);
    PyObject *cutter = PyObject_GetAttr(merger, str_cutter);
    PyObject *checkobj = PyObject_GetAttr(merger, str_check);
    PyObject *tiedobj = PyObject_GetAttr(merger, str_tied);
    PyObject *seen = PyObject_GetAttr(merger, str_seen);
    Py_ssize_t step = -2; /* DONE */
    int failed = 0, check = 0, tied = 0;
    if (heap == NULL || runs == NULL || key == NULL || cutter == NULL || checkobj == NULL || tiedobj == NULL
            || seen == NULL) {
        failed = 1;
        goto done;
    }
    tied = PyObject_IsTrue(tiedobj);
    if (tied < 0) {
        failed = 1;
        goto done;
    }
    if (!PyList_Check(heap) || !PyList_Check(runs)) {
        PyErr_SetString(PyExc_TypeError, "merger.heap and merger.runs must be lists");
        failed = 1;
        goto done;
    }
    check = PyObject_IsTrue(checkobj);
    if (check < 0) {
        failed = 1;
        goto done;
    }
    while (PyList_GET_SIZE(heap) > 0) {
        if (PyByteArray_GET_SIZE(out) >= out_bytes) {
            step = -1; /* FULL */
            break;
        }
        PyObject *top = PyList_GET_ITEM(heap, 0);
        if (!PyTuple_Check(top) || PyTuple_GET_SIZE(top) != 4) {
            PyErr_SetString(PyExc_TypeError, "a heap entry is (key, stream, start, end)");
            failed = 1;
            break;
        }
        Py_INCREF(top);
        PyObject *sobj = PyTuple_GET_ITEM(top, 1), *aobj = PyTuple_GET_ITEM(top, 2), *bobj = PyTuple_GET_ITEM(top, 3);
        Py_ssize_t s = PyLong_AsSsize_t(sobj), a = PyLong_AsSsize_t(aobj), b = PyLong_AsSsize_t(bobj);
        if (PyErr_Occurred() || s < 0 || s >= PyList_GET_SIZE(runs)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_IndexError, "a heap entry names no stream");
            }
            Py_DECREF(top);
            failed = 1;
            break;
        }
        PyObject *run = PyList_GET_ITEM(runs, s);
        Py_INCREF(run);
        if (!PyBytes_Check(run) || a < 0 || b < a || b > PyBytes_GET_SIZE(run)) {
            PyErr_SetString(PyExc_ValueError, "a heap entry's frame is not in its run");
            Py_DECREF(run);
            Py_DECREF(top);
            failed = 1;
            break;
        }
        int stop = 0, first = 1;
        if (tied) {
            first = first_of_group(merger, seen, PyTuple_GET_ITEM(top, 0), run, aobj, bobj);
            if (first < 0) {
                failed = 1;
            }
        }
        if (failed || !first) {
            /* an error, or a duplicate: neither skipped by OFFSET nor sent */
        }
        else if (skip) {
            skip -= 1;
        }
        else {
            if (cutter == Py_None) {
                Py_ssize_t at = PyByteArray_GET_SIZE(out);
                if (PyByteArray_Resize(out, at + (b - a)) < 0) {
                    failed = 1;
                }
                else {
                    memcpy(PyByteArray_AS_STRING(out) + at, PyBytes_AS_STRING(run) + a, (size_t)(b - a));
                }
            }
            else {
                PyObject *cargs[4] = {out, run, aobj, bobj};
                PyObject *r = PyObject_Vectorcall(cutter, cargs, 4, NULL);
                if (r == NULL) {
                    failed = 1;
                }
                Py_XDECREF(r);
            }
            if (!failed) {
                rows += 1;
                if (left > 0) {
                    left -= 1;
                    if (left == 0) {
                        if (PyList_SetSlice(heap, 0, PyList_GET_SIZE(heap), NULL) < 0) {
                            failed = 1;
                        }
                        step = -2;
                        stop = 1;
                    }
                }
            }
        }
        if (failed || stop) {
            Py_DECREF(run);
            Py_DECREF(top);
            break;
        }
        const unsigned char *bytes = (const unsigned char *)PyBytes_AS_STRING(run);
        Py_ssize_t len = PyBytes_GET_SIZE(run);
        if (b < len) {
            PyObject *cobj;
            Py_ssize_t length = b + 3 <= len ? (bytes[b] | (bytes[b + 1] << 8) | (bytes[b + 2] << 16)) : MAX_PAYLOAD;
            if (length != MAX_PAYLOAD) {
                cobj = PyLong_FromSsize_t(b + 4 + length);
            }
            else {
                PyObject *fargs[2] = {run, bobj};
                cobj = PyObject_Vectorcall(frame_end, fargs, 2, NULL);
            }
            PyObject *k = NULL, *entry = NULL, *r = NULL;
            if (cobj != NULL) {
                PyObject *kargs[3] = {run, bobj, cobj};
                k = PyObject_Vectorcall(key, kargs, 3, NULL);
            }
            if (k != NULL && check) {
                int lt = PyObject_RichCompareBool(k, PyTuple_GET_ITEM(top, 0), Py_LT);
                if (lt > 0) {
                    PyObject *err = PyObject_CallNoArgs(unordered);
                    if (err != NULL) {
                        PyErr_SetObject((PyObject *)Py_TYPE(err), err);
                        Py_DECREF(err);
                    }
                    lt = -1;
                }
                if (lt < 0) {
                    Py_CLEAR(k);
                }
            }
            if (k != NULL) {
                entry = PyTuple_Pack(4, k, sobj, bobj, cobj);
            }
            if (entry != NULL) {
                PyObject *hargs[2] = {heap, entry};
                r = PyObject_Vectorcall(heapreplace_fn, hargs, 2, NULL);
            }
            Py_XDECREF(r);
            Py_XDECREF(entry);
            Py_XDECREF(k);
            Py_XDECREF(cobj);
            Py_DECREF(run);
            Py_DECREF(top);
            if (r == NULL) {
                failed = 1;
                break;
            }
            continue;
        }
        Py_DECREF(run);
        Py_DECREF(top);
        step = s;
        if (set_ssize(merger, str_waiting, s) < 0) {
            failed = 1;
        }
        break;
    }
done:
    Py_XDECREF(heap);
    Py_XDECREF(runs);
    Py_XDECREF(key);
    Py_XDECREF(cutter);
    Py_XDECREF(checkobj);
    Py_XDECREF(tiedobj);
    Py_XDECREF(seen);
    if (failed) {
        /* the counts so far, as the Python loop's finally writes them (the error stays the one raised) */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (set_count(merger, str_skip, skip, skip_big) < 0 || set_count(merger, str_left, left, left_big) < 0
                || set_ssize(merger, str_rows, rows) < 0) {
            PyErr_Clear();
        }
        PyErr_Restore(type, value, tb);
        Py_XDECREF(skip_big);
        Py_XDECREF(left_big);
        return NULL;
    }
    int written = set_count(merger, str_skip, skip, skip_big) < 0 || set_count(merger, str_left, left, left_big) < 0
        || set_ssize(merger, str_rows, rows) < 0 ? -1 : 0;
    Py_XDECREF(skip_big);
    Py_XDECREF(left_big);
    if (written < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(step);
}

static PyMethodDef methods[] = {
    {"text_order_key", (PyCFunction)(void (*)(void))text_order_key, METH_FASTCALL,
     "text_order_key(index, wi, decoder, general, run, a, b)"},
    {"binary_order_key", (PyCFunction)(void (*)(void))binary_order_key, METH_FASTCALL,
     "binary_order_key(index, wi, columns, decoder, general, run, a, b)"},
    {"text_int_key", (PyCFunction)(void (*)(void))text_int_key, METH_FASTCALL,
     "text_int_key(index, descending, null, general, run, a, b)"},
    {"text_cut", (PyCFunction)(void (*)(void))text_cut, METH_FASTCALL, "text_cut(cut, fallback, out, run, a, b)"},
    {"binary_cut", (PyCFunction)(void (*)(void))binary_cut, METH_FASTCALL,
     "binary_cut(sizes, cut, columns, fallback, out, run, a, b)"},
    {"merge_loop", (PyCFunction)(void (*)(void))merge_loop, METH_FASTCALL,
     "merge_loop(merger, out, out_bytes, frame_end, unordered)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "merge._cframes", "The per-row steps of merge.frames' ORDER BY merge, in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__cframes(void)
{
    str_fast = PyUnicode_InternFromString("_fast");
    str_order_at = PyUnicode_InternFromString("order_at");
    str_heap = PyUnicode_InternFromString("heap");
    str_runs = PyUnicode_InternFromString("runs");
    str_key = PyUnicode_InternFromString("key");
    str_cutter = PyUnicode_InternFromString("cutter");
    str_check = PyUnicode_InternFromString("check");
    str_skip = PyUnicode_InternFromString("skip");
    str_left = PyUnicode_InternFromString("left");
    str_rows = PyUnicode_InternFromString("rows");
    str_waiting = PyUnicode_InternFromString("waiting");
    str_tied = PyUnicode_InternFromString("tied");
    str_seen = PyUnicode_InternFromString("seen");
    str_group = PyUnicode_InternFromString("group");
    str_first_of_group = PyUnicode_InternFromString("_first_of_group");
    if (str_fast == NULL || str_order_at == NULL || str_heap == NULL || str_runs == NULL || str_key == NULL
            || str_cutter == NULL || str_check == NULL || str_skip == NULL || str_left == NULL || str_rows == NULL
            || str_waiting == NULL || str_tied == NULL || str_seen == NULL || str_group == NULL
            || str_first_of_group == NULL) {
        return NULL;
    }
    PyObject *heapq = PyImport_ImportModule("heapq");
    if (heapq == NULL) {
        return NULL;
    }
    heapreplace_fn = PyObject_GetAttrString(heapq, "heapreplace");
    Py_DECREF(heapq);
    if (heapreplace_fn == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
