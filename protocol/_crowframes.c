/* protocol._crowframes: protocol.rowframes' two per-row loops over runs of row frames, in C (issue 15).
 *
 * Why: every scatter read walks each run of rows its nodes send twice, once to find where the complete rows stop
 * (`scan_rows`) and once to give them the client's sequence ids (`renumber`): Python-level loops of a few operations
 * a row, 0.5-0.8 us a row in a 100-row range (bench/RESULTS.md, round 6). These are the same loops, in C, with the
 * same results and the same IndexError where a frame runs past the end; protocol/rowframes.py keeps the Python
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

static PyMethodDef methods[] = {
    {"scan_rows", (PyCFunction)(void (*)(void))scan_rows, METH_FASTCALL, "scan_rows(buf, pos) -> (stop, rows, ended)"},
    {"renumber", (PyCFunction)(void (*)(void))renumber, METH_FASTCALL, "renumber(data, seq) -> next sequence id"},
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
