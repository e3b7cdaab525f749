/* The Show, Scout and ScoutAndShow values a C extension hands out: made once, then shared, as
 * the Python tables of scout_rules.moves do. Each extension including this has its own tables
 * and sets the classes in its setup().
 */
#ifndef SCOUT_RULES_OBJECTS_H
#define SCOUT_RULES_OBJECTS_H

#include <Python.h>

#include "_groups.h"

static PyObject *Show_cls, *Scout_cls, *SAS_cls, *End_left, *End_right;
static PyObject *shows_table[MAX_HAND + 1][MAX_HAND + 2];
static PyObject *scouts_table[2][2][MAX_HAND + 2];
/* sas_table[end][flip][pos] -> block of (MAX_HAND + 2) * (MAX_HAND + 2) entries, lazily. */
static PyObject **sas_table[2][2][MAX_HAND + 2];

static PyObject *show_obj(Py_ssize_t start, Py_ssize_t length) {
    PyObject *show = shows_table[start][length];
    if (show == NULL) {
        show = PyObject_CallFunction(Show_cls, "nn", start, length);
        if (show == NULL) return NULL;
        shows_table[start][length] = show;
    }
    return show;
}

static PyObject *scout_obj(int end, int flip, Py_ssize_t pos) {
    PyObject *scout = scouts_table[end][flip][pos];
    if (scout == NULL) {
        PyObject *at = PyLong_FromSsize_t(pos);
        if (at == NULL) return NULL;
        scout = PyObject_CallFunctionObjArgs(Scout_cls, end ? End_right : End_left,
                                             flip ? Py_True : Py_False, at, NULL);
        Py_DECREF(at);
        if (scout == NULL) return NULL;
        scouts_table[end][flip][pos] = scout;
    }
    return scout;
}

static PyObject *sas_obj(int end, int flip, Py_ssize_t pos, Py_ssize_t start, Py_ssize_t length) {
    PyObject **block = sas_table[end][flip][pos];
    if (block == NULL) {
        block = PyMem_Calloc((MAX_HAND + 2) * (MAX_HAND + 2), sizeof(PyObject *));
        if (block == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        sas_table[end][flip][pos] = block;
    }
    PyObject **slot = &block[start * (MAX_HAND + 2) + length];
    if (*slot == NULL) {
        PyObject *scout = scout_obj(end, flip, pos);
        if (scout == NULL) return NULL;
        PyObject *show = show_obj(start, length);
        if (show == NULL) return NULL;
        *slot = PyObject_CallFunctionObjArgs(SAS_cls, scout, show, NULL);
    }
    return *slot;
}

#endif
