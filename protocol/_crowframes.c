/* protocol._crowframes: protocol.rowframes' two per-row loops over runs of row frames, in C (and
 * protocol.verbatim's scan, protocol.cellswap's cell replacement).
 *
 * Why: every scatter read walks each run of rows its nodes send twice, once to find where the complete rows stop
 * (`scan_rows`) and once to give them the client's sequence ids (`renumber`): Python-level loops of a few operations
 * a row, which dominate the proxy's work on a relayed range (bench/RESULTS.md). These are the same loops, in C, with
 * the same results and the same IndexError where a frame runs past the end; protocol/rowframes.py keeps the Python
 * ones as the definition and the fallback (tests/protocol/test_rowframes.py runs both).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_PAYLOAD 0xFFFFFF

static Py_ssize_t
length_at(const unsigned char *b, Py_ssize_t pos)
{
    return b[pos] | (b[pos + 1] << 8) | (b[pos + 2] << 16);
}

/* scan_rows(buf, pos) -> (stop, rows, ended): protocol.rowframes.scan_rows. */
static PyObject *
scan_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "scan_rows takes 2 arguments");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len, rows = 0;
    int ended = 0;
    if (pos < 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_IndexError, "scan_rows: a negative position");
        return NULL;
    }
    while (end - pos >= 4) {
        Py_ssize_t length = length_at(buf, pos);
        Py_ssize_t nxt = pos + 4 + length;
        if (nxt > end) {
            break;
        }
        if (length) {
            unsigned char first = buf[pos + 4];
            if (first >= 0xFE && (first == 0xFF || length < 9)) {
                ended = 1;
                break;
            }
        }
        if (length == MAX_PAYLOAD) {
            int whole = 0;
            for (;;) {
                if (end - nxt < 4) {
                    break;
                }
                Py_ssize_t part = length_at(buf, nxt);
                nxt += 4 + part;
                if (nxt > end) {
                    break;
                }
                if (part != MAX_PAYLOAD) {
                    whole = 1;
                    break;
                }
            }
            if (!whole) {
                break;
            }
        }
        pos = nxt;
        rows += 1;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nnO)", pos, rows, ended ? Py_True : Py_False);
}

/* renumber(data, seq) -> the next sequence id: protocol.rowframes.renumber, in place. */
static PyObject *
renumber(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "renumber takes 2 arguments");
        return NULL;
    }
    long seq = PyLong_AsLong(args[1]);
    if (seq == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (seq < 0 || seq > 255) {
        PyErr_SetString(PyExc_ValueError, "byte must be in range(0, 256)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    unsigned char *data = (unsigned char *)view.buf;
    Py_ssize_t pos = 0, end = view.len;
    while (pos < end) {
        if (pos + 3 >= end) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_IndexError, "bytearray index out of range");
            return NULL;
        }
        data[pos + 3] = (unsigned char)seq;
        seq = (seq + 1) & 0xFF;
        pos += 4 + length_at(data, pos);
    }
    PyBuffer_Release(&view);
    return PyLong_FromLong(seq);
}


/* verbatim_scan: protocol.verbatim.VerbatimRelay.feed's loop over an answer's frames, for the frames that need no
 * Python object (it runs over every relayed answer, point selects included). Phases as protocol.verbatim numbers
 * them. */
enum { V_FIRST, V_COLUMNS, V_COLUMNS_EOF, V_ROWS, V_DONE };
#define MORE_RESULTS 0x0008
#define CURSOR_EXISTS 0x0040

/* verbatim_scan(buf, pos, phase, columns_left, deprecate_eof)
 *   -> (pos, phase, columns_left, rows, header, result_sets, status, warnings)
 * Walks whole frames from `pos` as VerbatimRelay.feed does (rows and column definitions skipped by their length,
 * possibly past the end of `buf`; a column count; the EOF after the column definitions; the classic EOF that ends
 * the rows) and stops before the first frame that takes more (an OK or ERR, a packet of 16 MB or more, a cursor's
 * first packet, anything unusual), at an incomplete frame it must read, or after the end of the answer
 * (phase V_DONE). `header` is where the last frame it walked starts (-1: none); `result_sets` how many result
 * sets began; (status, warnings) those of the last end packet walked (status -1: none). */
static PyObject *
verbatim_scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "verbatim_scan takes 5 arguments");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    long phase = PyLong_AsLong(args[2]);
    Py_ssize_t columns_left = PyLong_AsSsize_t(args[3]);
    int deof = PyObject_IsTrue(args[4]);
    if (PyErr_Occurred() || deof < 0) {
        return NULL;
    }
    if (pos < 0 || phase < V_FIRST || phase > V_DONE) {
        PyErr_SetString(PyExc_ValueError, "verbatim_scan: a negative position or an unknown phase");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t end = view.len, rows = 0, header = -1, sets = 0;
    long status = -1, warnings = 0;
    while (phase != V_DONE && end - pos >= 4) {
        Py_ssize_t length = length_at(buf, pos);
        if (length == MAX_PAYLOAD) {
            break; /* part of a packet of 16 MB or more: Python's */
        }
        if (phase == V_ROWS) {
            if (length == 0) { /* not a row any server sends; skipped as one */
                header = pos;
                rows += 1;
                pos += 4;
                continue;
            }
            if (end - pos < 5) {
                break;
            }
            unsigned char first = buf[pos + 4];
            if (first == 0xFF || (first == 0xFE && length < 9)) {
                if (first == 0xFF || length != 5 || deof || end - pos < 4 + length) {
                    break; /* an ERR, an OK, an odd EOF: Python's; or not whole yet */
                }
                header = pos;
                warnings = buf[pos + 5] | (buf[pos + 6] << 8);
                status = buf[pos + 7] | (buf[pos + 8] << 8);
                pos += 9;
                phase = (status & MORE_RESULTS) && !(status & CURSOR_EXISTS) ? V_FIRST : V_DONE;
                continue;
            }
            header = pos;
            rows += 1;
            pos += 4 + length;
            continue;
        }
        if (phase == V_COLUMNS) {
            header = pos;
            pos += 4 + length;
            columns_left -= 1;
            if (columns_left == 0) {
                phase = deof ? V_ROWS : V_COLUMNS_EOF;
            }
            continue;
        }
        if (end - pos < 4 + length) {
            break;
        }
        if (phase == V_FIRST && length == 1 && buf[pos + 4] > 0 && buf[pos + 4] < 0xFB) {
            header = pos;
            columns_left = buf[pos + 4];
            sets += 1;
            phase = V_COLUMNS;
            pos += 5;
            continue;
        }
        if (phase == V_COLUMNS_EOF && length == 5 && buf[pos + 4] == 0xFE) {
            if ((buf[pos + 7] | (buf[pos + 8] << 8)) & CURSOR_EXISTS) {
                break; /* the answer ends at a cursor: Python's */
            }
            header = pos;
            pos += 9;
            phase = V_ROWS;
            continue;
        }
        break; /* a packet to decode: Python's */
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(nlnnnnll)", pos, phase, columns_left, rows, header, sets, status, warnings);
}

/* swap_cells(buf, pos, fixed, nulls, index, convert) -> bytes | None: protocol.cellswap.swap_cells. */
typedef struct {
    Py_ssize_t pos, at, start, size, stop, head;
    PyObject *cell;
} swapped_row;

static void
release_rows(swapped_row *rows, Py_ssize_t n, swapped_row *local)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_DECREF(rows[i].cell);
    }
    if (rows != local) {
        PyMem_Free(rows);
    }
}

static PyObject *
swap_cells(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "swap_cells takes 6 arguments");
        return NULL;
    }
    if (!PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "swap_cells reads bytes");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t fixed = PyLong_AsSsize_t(args[2]);
    Py_ssize_t nulls = PyLong_AsSsize_t(args[3]);
    Py_ssize_t index = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    PyObject *convert = args[5];
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t end = PyBytes_GET_SIZE(args[0]);
    swapped_row local[8];
    swapped_row *rows = local;
    Py_ssize_t n = 0, cap = 8, total = 0, ending = -1;
    if (pos < 0) {
        pos = 0;
    }
    while (end - pos > 4) {
        Py_ssize_t length = length_at(b, pos);
        unsigned char first = b[pos + 4];
        Py_ssize_t stop = pos + 4 + length;
        if (stop > end || length == MAX_PAYLOAD || length == 0) {
            goto none;
        }
        if (first == 0xFF || (first == 0xFE && length < 9)) {
            ending = pos;
            break;
        }
        Py_ssize_t at;
        if (fixed >= 0) {
            if (pos + 5 + nulls > stop) {
                goto none;
            }
            for (Py_ssize_t k = 0; k < nulls; k++) {
                if (b[pos + 5 + k]) {
                    goto none;
                }
            }
            at = pos + 4 + fixed;
        }
        else {
            at = pos + 4;
            for (Py_ssize_t i = 0; i < index; i++) {
                if (at >= stop) {
                    goto none;
                }
                unsigned char c = b[at];
                if (c < 0xFB) {
                    at += 1 + c;
                }
                else if (c == 0xFB) {
                    at += 1;
                }
                else if (c == 0xFC && at + 2 < stop) {
                    at += 3 + (b[at + 1] | (b[at + 2] << 8));
                }
                else {
                    goto none;
                }
            }
        }
        if (at >= stop) {
            goto none;
        }
        Py_ssize_t start, size;
        unsigned char c = b[at];
        if (c < 0xFB) {
            start = at + 1;
            size = c;
        }
        else if (c == 0xFC && at + 2 < stop) {
            start = at + 3;
            size = b[at + 1] | (b[at + 2] << 8);
        }
        else {
            goto none;
        }
        if (start + size > stop) {
            goto none;
        }
        PyObject *value = PyBytes_FromStringAndSize((const char *)b + start, size);
        if (value == NULL) {
            goto error;
        }
        PyObject *cell = PyObject_CallOneArg(convert, value);
        Py_DECREF(value);
        if (cell == NULL) {
            if (PyErr_ExceptionMatches(PyExc_Exception)) {
                PyErr_Clear();
                goto none;
            }
            goto error;
        }
        if (!PyBytes_Check(cell)) {
            Py_DECREF(cell);
            PyErr_SetString(PyExc_TypeError, "swap_cells: convert must return bytes");
            goto error;
        }
        Py_ssize_t m = PyBytes_GET_SIZE(cell);
        Py_ssize_t head = m < 0xFB ? 1 : m < 0x10000 ? 3 : m < 0x1000000 ? 4 : 9;
        Py_ssize_t payload = length - (start + size - at) + head + m;
        if (payload >= MAX_PAYLOAD) {
            Py_DECREF(cell);
            goto none;
        }
        if (n == cap) {
            swapped_row *grown = PyMem_Malloc(2 * cap * sizeof(swapped_row));
            if (grown == NULL) {
                Py_DECREF(cell);
                PyErr_NoMemory();
                goto error;
            }
            memcpy(grown, rows, n * sizeof(swapped_row));
            if (rows != local) {
                PyMem_Free(rows);
            }
            rows = grown;
            cap *= 2;
        }
        rows[n].pos = pos;
        rows[n].at = at;
        rows[n].start = start;
        rows[n].size = size;
        rows[n].stop = stop;
        rows[n].head = head;
        rows[n].cell = cell;
        n++;
        total += 4 + payload;
        pos = stop;
    }
    if (ending < 0) {
        goto none;
    }
    total += end - ending;
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        goto error;
    }
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        swapped_row *r = &rows[i];
        Py_ssize_t m = PyBytes_GET_SIZE(r->cell);
        Py_ssize_t before = r->at - (r->pos + 4), after = r->stop - (r->start + r->size);
        Py_ssize_t payload = before + r->head + m + after;
        *o++ = payload & 0xFF;
        *o++ = (payload >> 8) & 0xFF;
        *o++ = (payload >> 16) & 0xFF;
        *o++ = b[r->pos + 3];
        memcpy(o, b + r->pos + 4, before);
        o += before;
        if (r->head == 1) {
            *o++ = (unsigned char)m;
        }
        else {
            int width = r->head == 3 ? 2 : r->head == 4 ? 3 : 8;
            *o++ = r->head == 3 ? 0xFC : r->head == 4 ? 0xFD : 0xFE;
            for (int k = 0; k < width; k++) {
                *o++ = (unsigned char)(((unsigned long long)m >> (8 * k)) & 0xFF);
            }
        }
        memcpy(o, PyBytes_AS_STRING(r->cell), m);
        o += m;
        memcpy(o, b + r->start + r->size, after);
        o += after;
    }
    memcpy(o, b + ending, end - ending);
    release_rows(rows, n, local);
    return out;
none:
    release_rows(rows, n, local);
    Py_RETURN_NONE;
error:
    release_rows(rows, n, local);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan_rows", (PyCFunction)(void (*)(void))scan_rows, METH_FASTCALL, "scan_rows(buf, pos) -> (stop, rows, ended)"},
    {"renumber", (PyCFunction)(void (*)(void))renumber, METH_FASTCALL, "renumber(data, seq) -> next sequence id"},
    {"verbatim_scan", (PyCFunction)(void (*)(void))verbatim_scan, METH_FASTCALL,
     "verbatim_scan(buf, pos, phase, columns_left, deprecate_eof) -> (pos, phase, columns_left, rows, header, "
     "result_sets, status, warnings)"},
    {"swap_cells", (PyCFunction)(void (*)(void))swap_cells, METH_FASTCALL,
     "swap_cells(buf, pos, fixed, nulls, index, convert) -> bytes | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._crowframes", "protocol.rowframes' per-row loops, in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__crowframes(void)
{
    return PyModule_Create(&module);
}
