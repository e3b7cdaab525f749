/* The move generators of scout_rules.moves in C, behind the same Python API.
 *
 * Optional: setup.py builds it when a compiler is present and the package falls back to the
 * pure-Python functions otherwise (scout_rules.moves.COMPILED says which). Every function here
 * returns exactly what its Python twin returns, in the same order; the tests run both on the
 * same inputs (tests/test_rules_speedups.py) and the perft goldens through either.
 *
 * Faces are read into a small C array; hands of MAX_HAND cards or more (never reached in
 * play) are handed to the pure-Python function given to setup(). The Show, Scout and
 * ScoutAndShow values handed out are made once and shared, as the Python tables do.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <structmember.h>

#include "_groups.h"
#include "_objects.h"

static PyObject *py_legal_shows, *py_has_show, *py_legal_sas, *py_has_sas, *py_group_key;

static int ready(void) {
    if (Show_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "scout_rules._speedups.setup() was not called");
        return 0;
    }
    return 1;
}

static PyObject *fallback(PyObject *fn, PyObject *const *args, Py_ssize_t nargs) {
    return PyObject_Vectorcall(fn, args, nargs, NULL);
}

#define MAX_SHOWS (MAX_HAND * (MAX_HAND + 1))

static PyObject *sp_group_key(PyObject *self, PyObject *faces) {
    int buf[MAX_HAND];
    if (!ready()) return NULL;
    Py_ssize_t n = read_faces(faces, buf);
    if (n == -1) return NULL;
    if (n == -2) return PyObject_CallOneArg(py_group_key, faces);
    return PyLong_FromLong(key_of(buf, n));
}

static PyObject *sp_legal_shows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int buf[MAX_HAND];
    int starts[MAX_SHOWS], lengths[MAX_SHOWS]; /* on the stack: re-entrant */
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "legal_shows(faces, beat)");
        return NULL;
    }
    if (!ready()) return NULL;
    long beat = PyLong_AsLong(args[1]);
    if (beat == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t n = read_faces(args[0], buf);
    if (n == -1) return NULL;
    if (n == -2) return fallback(py_legal_shows, args, nargs);
    int count = shows_of(buf, n, beat, starts, lengths);
    PyObject *out = PyList_New(count);
    if (out == NULL) return NULL;
    for (int k = 0; k < count; k++) {
        PyObject *show = show_obj(starts[k], lengths[k]);
        if (show == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        Py_INCREF(show);
        PyList_SET_ITEM(out, k, show);
    }
    return out;
}

static PyObject *sp_has_show(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int buf[MAX_HAND];
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "has_show(faces, beat)");
        return NULL;
    }
    if (!ready()) return NULL;
    long beat = PyLong_AsLong(args[1]);
    if (beat == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t n = read_faces(args[0], buf);
    if (n == -1) return NULL;
    if (n == -2) return fallback(py_has_show, args, nargs);
    return PyBool_FromLong(any_show(buf, n, beat));
}

/* Hand and active set of a Scout & Show question; 0 on success, -1 error, -2 fall back. */
static int read_sas_args(PyObject *const *args, Py_ssize_t nargs, int *faces, Py_ssize_t *n,
                         int *afaces, int *aothers, Py_ssize_t *m) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "expected (faces, active)");
        return -1;
    }
    if (!ready()) return -1;
    *n = read_faces(args[0], faces);
    if (*n < 0) return (int)*n;
    if (*n + 1 >= MAX_HAND) return -2;
    *m = read_cards(args[1], afaces, aothers);
    if (*m < 0) return (int)*m;
    return 0;
}

static void insert_face(const int *faces, Py_ssize_t n, Py_ssize_t pos, int value, int *out) {
    for (Py_ssize_t i = 0; i < pos; i++) out[i] = faces[i];
    out[pos] = value;
    for (Py_ssize_t i = pos; i < n; i++) out[i + 1] = faces[i];
}

static PyObject *sp_legal_scout_and_shows(PyObject *self, PyObject *const *args,
                                          Py_ssize_t nargs) {
    int faces[MAX_HAND], afaces[MAX_HAND], aothers[MAX_HAND], grown[MAX_HAND + 1];
    int starts[MAX_SHOWS], lengths[MAX_SHOWS]; /* on the stack: re-entrant */
    Py_ssize_t n, m;
    int status = read_sas_args(args, nargs, faces, &n, afaces, aothers, &m);
    if (status == -1) return NULL;
    if (status == -2) return fallback(py_legal_sas, args, nargs);
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    int ends = m == 0 ? 0 : (m == 1 ? 1 : 2);
    for (int end = 0; end < ends; end++) {
        long beat = m == 1 ? 0 : (end == 0 ? key_of(afaces + 1, m - 1) : key_of(afaces, m - 1));
        Py_ssize_t t = end == 0 ? 0 : m - 1;
        for (int flip = 0; flip < 2; flip++) {
            int value = flip ? aothers[t] : afaces[t];
            for (Py_ssize_t pos = 0; pos <= n; pos++) {
                insert_face(faces, n, pos, value, grown);
                int count = shows_of(grown, n + 1, beat, starts, lengths);
                for (int k = 0; k < count; k++) {
                    PyObject *item = sas_obj(end, flip, pos, starts[k], lengths[k]);
                    if (item == NULL || PyList_Append(out, item) < 0) {
                        Py_DECREF(out);
                        return NULL;
                    }
                }
            }
        }
    }
    return out;
}

static PyObject *sp_has_scout_and_show(PyObject *self, PyObject *const *args,
                                       Py_ssize_t nargs) {
    int faces[MAX_HAND], afaces[MAX_HAND], aothers[MAX_HAND], grown[MAX_HAND + 1];
    Py_ssize_t n, m;
    int status = read_sas_args(args, nargs, faces, &n, afaces, aothers, &m);
    if (status == -1) return NULL;
    if (status == -2) return fallback(py_has_sas, args, nargs);
    int ends = m == 0 ? 0 : (m == 1 ? 1 : 2);
    for (int end = 0; end < ends; end++) {
        if (m == 1) Py_RETURN_TRUE;
        long beat = end == 0 ? key_of(afaces + 1, m - 1) : key_of(afaces, m - 1);
        Py_ssize_t t = end == 0 ? 0 : m - 1;
        for (int flip = 0; flip < 2; flip++) {
            int value = flip ? aothers[t] : afaces[t];
            for (Py_ssize_t pos = 0; pos <= n; pos++) {
                insert_face(faces, n, pos, value, grown);
                if (any_show(grown, n + 1, beat)) Py_RETURN_TRUE;
            }
        }
    }
    Py_RETURN_FALSE;
}

static PyObject *sp_faces_of(PyObject *self, PyObject *cards) {
    PyObject *fast = PySequence_Fast(cards, "cards must be a sequence");
    if (fast == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    PyObject *out = PyTuple_New(n);
    if (out == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *card = items[i], *face;
        if (PyTuple_Check(card) && PyTuple_GET_SIZE(card) > 0) {
            face = PyTuple_GET_ITEM(card, 0);
            Py_INCREF(face);
        } else {
            face = PySequence_GetItem(card, 0);
            if (face == NULL) {
                Py_DECREF(out);
                Py_DECREF(fast);
                return NULL;
            }
        }
        PyTuple_SET_ITEM(out, i, face);
    }
    Py_DECREF(fast);
    return out;
}

/* groups.hand_potential, one pass: each multi-card group slice ending at a card is a set, a
 * rising run or a falling run, so the squares of its lengths sum in closed form. */
typedef struct {
    long prev, set, up, down, total;
} Potential;

static inline long squares_from_2(long m) { return m < 2 ? 0 : m * (m + 1) * (2 * m + 1) / 6 - 1; }

static inline void potential_add(Potential *p, long face, int first) {
    if (first) {
        p->set = p->up = p->down = 1;
    } else {
        p->set = face == p->prev ? p->set + 1 : 1;
        p->up = face == p->prev + 1 ? p->up + 1 : 1;
        p->down = face == p->prev - 1 ? p->down + 1 : 1;
    }
    p->prev = face;
    p->total += squares_from_2(p->set) + squares_from_2(p->up) + squares_from_2(p->down);
}

static PyObject *sp_hand_potential(PyObject *self, PyObject *faces) {
    PyObject *fast = PySequence_Fast(faces, "faces must be a sequence of ints");
    if (fast == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    Potential p = {0, 0, 0, 0, 0};
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(items[i]);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return NULL;
        }
        potential_add(&p, v, i == 0);
    }
    Py_DECREF(fast);
    return PyLong_FromLong(p.total);
}

/* One card's value at index 0 (face) or 1 (other); -1 with an exception set on error. */
static long card_value(PyObject *card, Py_ssize_t index) {
    if (PyTuple_Check(card) && PyTuple_GET_SIZE(card) == 2)
        return PyLong_AsLong(PyTuple_GET_ITEM(card, index));
    PyObject *item = PySequence_GetItem(card, index);
    if (item == NULL) return -1;
    long v = PyLong_AsLong(item);
    Py_DECREF(item);
    return v;
}

static PyObject *sp_more_playable_rotated(PyObject *self, PyObject *hand) {
    PyObject *fast = PySequence_Fast(hand, "a hand is a sequence of cards");
    if (fast == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    Potential held = {0, 0, 0, 0, 0}, turned = {0, 0, 0, 0, 0};
    for (Py_ssize_t i = 0; i < n; i++) {
        long face = card_value(items[i], 0);
        long other = face == -1 && PyErr_Occurred() ? -1 : card_value(items[n - 1 - i], 1);
        if (PyErr_Occurred()) {
            Py_DECREF(fast);
            return NULL;
        }
        potential_add(&held, face, i == 0);
        potential_add(&turned, other, i == 0);
    }
    Py_DECREF(fast);
    return PyBool_FromLong(turned.total > held.total);
}

/* maker(cls, names)(*values): a new cls with its slots `names` set to `values` in order,
 * without running __init__: for a frozen dataclass the engine builds with checked values. */
#define MAX_SLOTS 32

typedef struct {
    PyTypeObject *cls;
    Py_ssize_t count;
    Py_ssize_t offsets[MAX_SLOTS];
} Maker;

static void maker_free(PyObject *capsule) {
    Maker *maker = PyCapsule_GetPointer(capsule, "scout_rules.maker");
    if (maker != NULL) {
        Py_XDECREF(maker->cls);
        PyMem_Free(maker);
    }
}

static PyObject *make(PyObject *capsule, PyObject *const *args, Py_ssize_t nargs) {
    Maker *maker = PyCapsule_GetPointer(capsule, "scout_rules.maker");
    if (maker == NULL) return NULL;
    if (nargs != maker->count) {
        PyErr_Format(PyExc_TypeError, "%s needs %zd values, got %zd", maker->cls->tp_name,
                     maker->count, nargs);
        return NULL;
    }
    PyObject *obj = maker->cls->tp_alloc(maker->cls, 0);
    if (obj == NULL) return NULL;
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject **slot = (PyObject **)((char *)obj + maker->offsets[i]);
        Py_INCREF(args[i]);
        Py_XSETREF(*slot, args[i]);
    }
    return obj;
}

static PyMethodDef make_def = {"make", (PyCFunction)(void (*)(void))make, METH_FASTCALL,
                               "a new object with these slot values"};

static PyObject *sp_maker(PyObject *self, PyObject *args) {
    PyObject *cls, *names;
    if (!PyArg_ParseTuple(args, "O!O!", &PyType_Type, &cls, &PyTuple_Type, &names)) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    if (count > MAX_SLOTS) {
        PyErr_SetString(PyExc_ValueError, "too many slots");
        return NULL;
    }
    Maker *maker = PyMem_Calloc(1, sizeof(Maker));
    if (maker == NULL) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *descr = PyObject_GetAttr(cls, PyTuple_GET_ITEM(names, i));
        if (descr == NULL) {
            PyMem_Free(maker);
            return NULL;
        }
        int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX;
        if (ok) maker->offsets[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
        Py_DECREF(descr);
        if (!ok) {
            PyMem_Free(maker);
            PyErr_Format(PyExc_TypeError, "%R is not a slot", PyTuple_GET_ITEM(names, i));
            return NULL;
        }
    }
    Py_INCREF(cls);
    maker->cls = (PyTypeObject *)cls;
    maker->count = count;
    PyObject *capsule = PyCapsule_New(maker, "scout_rules.maker", maker_free);
    if (capsule == NULL) {
        Py_DECREF(cls);
        PyMem_Free(maker);
        return NULL;
    }
    PyObject *fn = PyCFunction_New(&make_def, capsule);
    Py_DECREF(capsule);
    return fn;
}

/* shuffled_cards(state, deck, cards) -> (hand-ordered cards, state): cards.shuffled_deck's
 * Fisher-Yates and orientation draws from a SplitMix64 state; cards[face][other] is the Card. */
static uint64_t splitmix(uint64_t *state) {
    *state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = *state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static PyObject *sp_shuffled_cards(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    int lows[MAX_HAND], highs[MAX_HAND];
    if (nargs != 3 || !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "shuffled_cards(state, deck, cards)");
        return NULL;
    }
    uint64_t state = PyLong_AsUnsignedLongLong(args[0]);
    if (state == (uint64_t)-1 && PyErr_Occurred()) return NULL;
    Py_ssize_t n = read_cards(args[1], lows, highs);
    if (n == -1) return NULL;
    if (n == -2) {
        PyErr_SetString(PyExc_ValueError, "a deck is at most 63 (low, high) pairs");
        return NULL;
    }
    for (Py_ssize_t i = n - 1; i > 0; i--) {
        uint64_t bound = (uint64_t)i + 1, x;
        uint64_t rest = (0 - bound) % bound; /* 2**64 % bound */
        do {
            x = splitmix(&state);
        } while (rest != 0 && x >= (uint64_t)0 - rest);
        Py_ssize_t j = (Py_ssize_t)(x % bound);
        int lo = lows[i], hi = highs[i];
        lows[i] = lows[j];
        highs[i] = highs[j];
        lows[j] = lo;
        highs[j] = hi;
    }
    PyObject *table = args[2];
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int turned = (int)(splitmix(&state) >> 63);
        int face = turned ? highs[i] : lows[i], other = turned ? lows[i] : highs[i];
        PyObject *row = face >= 0 && face < PyTuple_GET_SIZE(table) ? PyTuple_GET_ITEM(table, face)
                                                                    : NULL;
        PyObject *card = row != NULL && PyTuple_Check(row) && other >= 0 &&
                                 other < PyTuple_GET_SIZE(row)
                             ? PyTuple_GET_ITEM(row, other)
                             : NULL;
        if (card == NULL) {
            Py_DECREF(out);
            PyErr_Format(PyExc_ValueError, "no card %d/%d in the table", face, other);
            return NULL;
        }
        Py_INCREF(card);
        PyList_SET_ITEM(out, i, card);
    }
    PyObject *end = PyLong_FromUnsignedLongLong(state);
    if (end == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    return Py_BuildValue("(NN)", out, end);
}

static PyObject *sp_setup(PyObject *self, PyObject *args) {
    PyObject *show, *scout, *sas, *left, *right, *ls, *hs, *lsas, *hsas, *gk;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOO", &show, &scout, &sas, &left, &right, &ls, &hs,
                          &lsas, &hsas, &gk))
        return NULL;
    if (Show_cls != NULL) Py_RETURN_NONE;
    PyObject *all[] = {show, scout, sas, left, right, ls, hs, lsas, hsas, gk};
    for (int i = 0; i < 10; i++) Py_INCREF(all[i]);
    Show_cls = show;
    Scout_cls = scout;
    SAS_cls = sas;
    End_left = left;
    End_right = right;
    py_legal_shows = ls;
    py_has_show = hs;
    py_legal_sas = lsas;
    py_has_sas = hsas;
    py_group_key = gk;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", sp_setup, METH_VARARGS,
     "setup(Show, Scout, ScoutAndShow, End.LEFT, End.RIGHT, legal_shows, has_show, "
     "legal_scout_and_shows, has_scout_and_show, group_key): the types to build and the "
     "pure-Python functions to hand oversized hands to."},
    {"group_key", sp_group_key, METH_O, "moves.group_key"},
    {"faces_of", sp_faces_of, METH_O, "cards.faces_of"},
    {"hand_potential", sp_hand_potential, METH_O, "groups.hand_potential"},
    {"more_playable_rotated", sp_more_playable_rotated, METH_O, "groups.more_playable_rotated"},
    {"shuffled_cards", (PyCFunction)(void (*)(void))sp_shuffled_cards, METH_FASTCALL,
     "shuffled_cards(state, deck, cards): cards.shuffled_deck's draws"},
    {"maker", sp_maker, METH_VARARGS,
     "maker(cls, slot_names): a function of the slots' values that builds a cls without "
     "calling __init__"},
    {"legal_shows", (PyCFunction)(void (*)(void))sp_legal_shows, METH_FASTCALL,
     "moves.legal_shows"},
    {"has_show", (PyCFunction)(void (*)(void))sp_has_show, METH_FASTCALL, "moves.has_show"},
    {"legal_scout_and_shows", (PyCFunction)(void (*)(void))sp_legal_scout_and_shows,
     METH_FASTCALL, "moves.legal_scout_and_shows"},
    {"has_scout_and_show", (PyCFunction)(void (*)(void))sp_has_scout_and_show, METH_FASTCALL,
     "moves.has_scout_and_show"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups",
    "The move generators of scout_rules.moves in C (optional; see moves.COMPILED).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
