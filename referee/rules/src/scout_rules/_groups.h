/* Cards read into C arrays, group strength and Show generation: shared by the C extensions.
 *
 * Each function returns exactly what its Python twin in scout_rules.moves returns, in the same
 * order (group_key, legal_shows, has_show); the extensions' tests pin them to each other.
 */
#ifndef SCOUT_RULES_GROUPS_H
#define SCOUT_RULES_GROUPS_H

#include <Python.h>

#define MAX_HAND 64
#define SET_BIT 16

/* Reads a sequence of small ints into out; returns the length, -1 on error, -2 if too long. */
static inline Py_ssize_t read_faces(PyObject *faces, int *out) {
    PyObject *fast = PySequence_Fast(faces, "faces must be a sequence of ints");
    if (fast == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n >= MAX_HAND) {
        Py_DECREF(fast);
        return -2;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(items[i]);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        out[i] = (int)v;
    }
    Py_DECREF(fast);
    return n;
}

/* Reads Cards (face, other) into faces/others; same return convention as read_faces. */
static inline Py_ssize_t read_cards(PyObject *cards, int *faces, int *others) {
    PyObject *fast = PySequence_Fast(cards, "an active set is a sequence of cards");
    if (fast == NULL) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n >= MAX_HAND) {
        Py_DECREF(fast);
        return -2;
    }
    PyObject **items = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *card = items[i];
        if (!PyTuple_Check(card) || PyTuple_GET_SIZE(card) != 2) {
            Py_DECREF(fast);
            return -2;
        }
        long f = PyLong_AsLong(PyTuple_GET_ITEM(card, 0));
        long o = PyLong_AsLong(PyTuple_GET_ITEM(card, 1));
        if (PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        faces[i] = (int)f;
        others[i] = (int)o;
    }
    Py_DECREF(fast);
    return n;
}

static inline long key_of(const int *faces, Py_ssize_t n) {
    if (n == 0) return -1;
    int first = faces[0];
    if (n == 1) return 32 | SET_BIT | first;
    int second = faces[1];
    if (second == first) {
        for (Py_ssize_t i = 0; i < n; i++)
            if (faces[i] != first) return -1;
        return (long)n << 5 | SET_BIT | first;
    }
    int step = second - first;
    if (step != 1 && step != -1) return -1;
    for (Py_ssize_t i = 1; i < n; i++)
        if (faces[i] - faces[i - 1] != step) return -1;
    return (long)n << 5 | (step == 1 ? first : faces[n - 1]);
}

/* The shows of faces[0:n] beating `beat`, as (start, length) pairs in the Python order. */
static inline int shows_of(const int *faces, Py_ssize_t n, long beat, int *starts, int *lengths) {
    int count = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int f = faces[i];
        if ((48 | f) > beat) {
            starts[count] = (int)i;
            lengths[count++] = 1;
        }
        if (i + 1 >= n) break;
        int g = faces[i + 1];
        if (g == f) {
            for (Py_ssize_t j = i + 1; j < n && faces[j] == f; j++) {
                long length = j - i + 1;
                if ((length << 5 | SET_BIT | f) > beat) {
                    starts[count] = (int)i;
                    lengths[count++] = (int)length;
                }
            }
        } else if (g == f + 1) {
            for (Py_ssize_t j = i + 1; j < n && faces[j] == f + (j - i); j++) {
                long length = j - i + 1;
                if ((length << 5 | f) > beat) {
                    starts[count] = (int)i;
                    lengths[count++] = (int)length;
                }
            }
        } else if (g == f - 1) {
            for (Py_ssize_t j = i + 1; j < n && faces[j] == f - (j - i); j++) {
                long length = j - i + 1;
                if ((length << 5 | faces[j]) > beat) {
                    starts[count] = (int)i;
                    lengths[count++] = (int)length;
                }
            }
        }
    }
    return count;
}

static inline int any_show(const int *faces, Py_ssize_t n, long beat) {
    if ((beat >> 5) > n) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int f = faces[i];
        if ((48 | f) > beat) return 1;
        Py_ssize_t j = i + 1;
        if (j < n) {
            int step = faces[j] - f;
            if (step == 0 || step == 1 || step == -1) {
                for (; j < n && faces[j] == f + step * (j - i); j++) {
                    long length = j - i + 1;
                    int low = step >= 0 ? f : faces[j];
                    if ((length << 5 | (step == 0 ? SET_BIT : 0) | low) > beat) return 1;
                }
            }
        }
    }
    return 0;
}

#endif
