/* Greedy playouts of one SCOUT round in C: the compiled core of scout_rules.playout.
 *
 * Optional, as _speedups is: without it scout_rules.playout plays the same round through the
 * engine in Python, the reference. Both give the same scores for every position
 * (tests/test_rules_playout.py), because the policy below is the Python one step for step,
 * ties included (the first of equal candidates in the Python generation order wins), and the
 * round's transitions are State.apply's.
 *
 * The round is copied into C arrays and played there; the caller's State is not touched.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_groups.h"
#include "_objects.h"

#define MAX_SEATS 5
#define NO_ACTIVE_SET 0
#define LEFT 0
#define RIGHT 1

enum { SHOW, SCOUT, SCOUT_AND_SHOW };

typedef struct {
    int kind, start, length, end, flip, pos;
} Move;

typedef struct {
    int n;
    int len[MAX_SEATS];
    int face[MAX_SEATS][MAX_HAND];
    int other[MAX_SEATS][MAX_HAND];
    int alen;
    int aface[MAX_HAND], aother[MAX_HAND];
    long akey;
    int last_shower; /* -1: nobody has shown this round */
    int scouts_since;
    int captured[MAX_SEATS], chips[MAX_SEATS], tokens[MAX_SEATS];
    int cur;
    long actions, max_actions;
    int over, exempt;
} Round;

/* policy.show_key of a group's strength key */
static inline long show_pref(long key) {
    return (key >> 5) << 6 | ((key & SET_BIT) ? 0 : 32) | (15 - (key & 15));
}

static inline int near(int d) { return d >= -1 && d <= 1; }

/* policy.fit: the longest set or run through value inserted before faces[pos]. */
static int fit(const int *faces, int n, int pos, int value) {
    static const int steps[3] = {0, 1, -1};
    int best = 1;
    for (int k = 0; k < 3; k++) {
        int step = steps[k], length = 1;
        int expect = value - step;
        for (int i = pos - 1; i >= 0 && faces[i] == expect; i--, expect -= step) length++;
        expect = value + step;
        for (int i = pos; i < n && faces[i] == expect; i++, expect += step) length++;
        if (length > best) best = length;
    }
    return best;
}

typedef void (*Visit)(void *ctx, long pref, const Move *move);

/* policy.scout_and_shows: every Scout & Show of at least min_length cards with its preference,
 * handed to visit in the Python generation order. */
static void each_scout_and_show(const int *aface, const int *aother, int alen, const int *faces,
                                int n, int min_length, Visit visit, void *ctx) {
    static const int steps[3] = {0, 1, -1};
    int starts[MAX_HAND * (MAX_HAND + 1)], lengths[MAX_HAND * (MAX_HAND + 1)];
    int ends = alen == 1 ? 1 : 2;
    for (int end = 0; end < ends; end++) {
        int rest_len = alen - 1;
        long beat = rest_len ? key_of(end == LEFT ? aface + 1 : aface, rest_len) : NO_ACTIVE_SET;
        if ((beat >> 5) > n + 1) continue;
        int taken = (end == LEFT || alen == 1) ? 0 : alen - 1;
        int count = shows_of(faces, n, beat, starts, lengths);
        for (int k = 0; k < count; k++) {
            if (lengths[k] < min_length) continue;
            Move m = {SCOUT_AND_SHOW, starts[k], lengths[k], end, 0, n};
            visit(ctx, show_pref(key_of(faces + starts[k], lengths[k])), &m);
        }
        for (int flip = 0; flip < 2; flip++) {
            int value = flip ? aother[taken] : aface[taken];
            for (int pos = 0; pos <= n; pos++) {
                int left = pos ? faces[pos - 1] - value : 9;
                int right = pos < n ? faces[pos] - value : 9;
                if (!(near(left) || near(right))) continue;
                for (int k = 0; k < 3; k++) {
                    int step = steps[k];
                    int expect = value - step, i = pos - 1;
                    while (i >= 0 && faces[i] == expect) {
                        expect -= step;
                        i--;
                    }
                    expect = value + step;
                    int j = pos;
                    while (j < n && faces[j] == expect) {
                        expect += step;
                        j++;
                    }
                    int start = i + 1, length = j - start + 1;
                    if (length < 2) continue;
                    long key;
                    if (step == 0) {
                        key = (long)length << 5 | SET_BIT | value;
                    } else {
                        int first = value - step * (pos - start), last = value + step * (j - pos);
                        key = (long)length << 5 | (first < last ? first : last);
                    }
                    if (length >= min_length && key > beat) {
                        Move m = {SCOUT_AND_SHOW, start, length, end, flip, pos};
                        visit(ctx, (long)length << 6 | ((key & SET_BIT) ? 0 : 32) | (15 - (key & 15)),
                              &m);
                    }
                }
            }
        }
    }
}

typedef struct {
    long best;
    int min_length;
    Move move;
} Best;

/* max(): the first of the highest preference (of at least min_length cards). */
static void keep_best(void *ctx, long pref, const Move *move) {
    Best *b = ctx;
    if (move->length >= b->min_length && pref > b->best) {
        b->best = pref;
        b->move = *move;
    }
}

/* policy._best_scout */
static Move best_scout(const int *aface, const int *aother, int alen, const int *faces, int n) {
    int best_score = 0;
    Move best = {SCOUT, 0, 0, LEFT, 0, 0};
    int ends = alen == 1 ? 1 : 2;
    for (int end = 0; end < ends; end++) {
        int taken = (end == LEFT || alen == 1) ? 0 : alen - 1;
        for (int flip = 0; flip < 2; flip++) {
            int value = flip ? aother[taken] : aface[taken];
            int bonus = flip ? 0 : 1;
            if (2 + bonus > best_score) {
                best_score = 2 + bonus;
                best = (Move){SCOUT, 0, 0, end, flip, 0};
            }
            for (int pos = 0; pos <= n; pos++) {
                int left = pos ? faces[pos - 1] - value : 9;
                int right = pos < n ? faces[pos] - value : 9;
                if (near(left) || near(right)) {
                    int score = fit(faces, n, pos, value) * 2 + bonus;
                    if (score > best_score) {
                        best_score = score;
                        best = (Move){SCOUT, 0, 0, end, flip, pos};
                    }
                }
            }
        }
    }
    return best;
}

/* policy.greedy_action; 0 when the seat has no move the policy knows (never in a live round). */
static int greedy(const Round *r, Move *out) {
    int seat = r->cur;
    const int *faces = r->face[seat];
    int n = r->len[seat];
    int starts[MAX_HAND * (MAX_HAND + 1)], lengths[MAX_HAND * (MAX_HAND + 1)];
    int count = shows_of(faces, n, r->akey, starts, lengths);
    if (count) {
        int best = 0;
        long best_pref = show_pref(key_of(faces + starts[0], lengths[0]));
        for (int k = 1; k < count; k++) {
            long pref = show_pref(key_of(faces + starts[k], lengths[k]));
            if (pref > best_pref) {
                best = k;
                best_pref = pref;
            }
        }
        *out = (Move){SHOW, starts[best], lengths[best], 0, 0, 0};
        return 1;
    }
    if (r->tokens[seat] && r->alen) {
        Best b = {-1, r->alen > 2 ? r->alen : 2, {0}};
        each_scout_and_show(r->aface, r->aother, r->alen, faces, n, b.min_length, keep_best, &b);
        if (b.best >= 0) {
            *out = b.move;
            return 1;
        }
    }
    if (!(r->alen && (r->n > 2 || r->chips[seat] > 0))) return 0;
    *out = best_scout(r->aface, r->aother, r->alen, faces, n);
    return 1;
}

static void end_round(Round *r, int exempt) {
    r->over = 1;
    r->exempt = exempt;
}

static void do_scout(Round *r, int seat, int end, int flip, int pos) {
    int f, o;
    if (end == LEFT) {
        f = r->aface[0];
        o = r->aother[0];
        for (int i = 1; i < r->alen; i++) {
            r->aface[i - 1] = r->aface[i];
            r->aother[i - 1] = r->aother[i];
        }
    } else {
        f = r->aface[r->alen - 1];
        o = r->aother[r->alen - 1];
    }
    r->alen--;
    r->akey = r->alen ? key_of(r->aface, r->alen) : NO_ACTIVE_SET;
    int *hf = r->face[seat], *ho = r->other[seat];
    for (int i = r->len[seat]; i > pos; i--) {
        hf[i] = hf[i - 1];
        ho[i] = ho[i - 1];
    }
    hf[pos] = flip ? o : f;
    ho[pos] = flip ? f : o;
    r->len[seat]++;
    if (r->n > 2) r->chips[r->last_shower]++;
}

static void do_show(Round *r, int seat, int start, int length) {
    int *hf = r->face[seat], *ho = r->other[seat];
    r->captured[seat] += r->alen;
    for (int i = 0; i < length; i++) {
        r->aface[i] = hf[start + i];
        r->aother[i] = ho[start + i];
    }
    r->alen = length;
    for (int i = start; i + length < r->len[seat]; i++) {
        hf[i] = hf[i + length];
        ho[i] = ho[i + length];
    }
    r->len[seat] -= length;
    r->akey = key_of(r->aface, length);
    r->last_shower = seat;
    r->scouts_since = 0;
    if (!r->len[seat]) {
        end_round(r, -1);
        return;
    }
    int next = (seat + 1) % r->n;
    r->cur = next;
    if (r->n == 2 && !r->chips[next] && !any_show(r->face[next], r->len[next], r->akey))
        end_round(r, seat);
}

/* State.apply of a move the policy chose (legal by construction). */
static void apply(Round *r, const Move *m) {
    int seat = r->cur;
    r->actions++;
    if (m->kind == SHOW) {
        do_show(r, seat, m->start, m->length);
    } else if (m->kind == SCOUT) {
        do_scout(r, seat, m->end, m->flip, m->pos);
        if (r->n == 2) {
            r->chips[seat]--;
            if (!r->chips[seat] && !any_show(r->face[seat], r->len[seat], r->akey))
                end_round(r, r->last_shower);
        } else if (++r->scouts_since == r->n - 1) {
            end_round(r, r->last_shower);
        } else {
            r->cur = (seat + 1) % r->n;
        }
    } else {
        r->tokens[seat] = 0;
        do_scout(r, seat, m->end, m->flip, m->pos);
        do_show(r, seat, m->start, m->length);
    }
    if (!r->over && r->actions >= r->max_actions) end_round(r, -1);
}

/* Reads a list of n small ints; 0 on success, -1 on a Python error, -2 when unusable. */
static int read_ints(PyObject *seq, int n, int *out) {
    if (!PyList_Check(seq) && !PyTuple_Check(seq)) return -2;
    if (PySequence_Fast_GET_SIZE(seq) != n) return -2;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (int i = 0; i < n; i++) {
        long v = PyLong_AsLong(items[i]); /* bools are ints */
        if (v == -1 && PyErr_Occurred()) return -1;
        out[i] = (int)v;
    }
    return 0;
}

static int read_round(PyObject *const *args, Round *r) {
    long n = PyLong_AsLong(args[0]);
    if (n == -1 && PyErr_Occurred()) return -1;
    if (n < 2 || n > MAX_SEATS) return -2;
    r->n = (int)n;
    PyObject *hands = args[1];
    if (!PyList_Check(hands) || PyList_GET_SIZE(hands) != n) return -2;
    int total = 0;
    for (int s = 0; s < n; s++) {
        Py_ssize_t size = read_cards(PyList_GET_ITEM(hands, s), r->face[s], r->other[s]);
        if (size < 0) return (int)size;
        r->len[s] = (int)size;
        total += (int)size;
    }
    Py_ssize_t alen = read_cards(args[2], r->aface, r->aother);
    if (alen < 0) return (int)alen;
    r->alen = (int)alen;
    if (total + alen >= MAX_HAND - 1) return -2; /* no hand can outgrow its array */
    r->akey = alen ? key_of(r->aface, alen) : NO_ACTIVE_SET;
    long values[5];
    for (int i = 0; i < 5; i++) {
        values[i] = PyLong_AsLong(args[6 + i]);
        if (values[i] == -1 && PyErr_Occurred()) return -1;
    }
    r->last_shower = (int)values[0];
    r->scouts_since = (int)values[1];
    r->cur = (int)values[2];
    r->actions = values[3];
    r->max_actions = values[4];
    if (r->cur < 0 || r->cur >= n || r->last_shower < -1 || r->last_shower >= n) return -2;
    if (alen && r->last_shower < 0) return -2;
    int rc;
    if ((rc = read_ints(args[3], r->n, r->captured)) < 0) return rc;
    if ((rc = read_ints(args[4], r->n, r->chips)) < 0) return rc;
    if ((rc = read_ints(args[5], r->n, r->tokens)) < 0) return rc;
    r->over = 0;
    r->exempt = -1;
    return 0;
}

static PyObject *pl_round_scores(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError,
                        "round_scores(n, hands, active, captured, chips, tokens, last_shower, "
                        "scouts_since_show, current_seat, round_actions, max_actions)");
        return NULL;
    }
    Round r;
    int rc = read_round(args, &r);
    if (rc == -1) return NULL;
    if (rc == -2) Py_RETURN_NONE;
    Move m;
    while (!r.over) {
        if (!greedy(&r, &m)) Py_RETURN_NONE;
        apply(&r, &m);
    }
    PyObject *out = PyTuple_New(r.n);
    if (out == NULL) return NULL;
    for (int s = 0; s < r.n; s++) {
        long score = r.captured[s] + r.chips[s] - (s == r.exempt ? 0 : r.len[s]);
        PyObject *v = PyLong_FromLong(score);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, s, v);
    }
    return out;
}


/* ----- the candidate actions of a search (scout_rules.playout.candidates) ----- */

typedef struct {
    Move *moves;
    long *prefs;
    int count, size;
} MoveList;

static void append_move(void *ctx, long pref, const Move *move) {
    MoveList *list = ctx;
    if (list->count == list->size) {
        int size = list->size ? list->size * 2 : 64;
        Move *moves = PyMem_Realloc(list->moves, size * sizeof(Move));
        if (moves != NULL) list->moves = moves;
        long *prefs = PyMem_Realloc(list->prefs, size * sizeof(long));
        if (prefs != NULL) list->prefs = prefs;
        if (moves == NULL || prefs == NULL) return; /* dropped; reported by the caller */
        list->size = size;
    }
    list->moves[list->count] = *move;
    list->prefs[list->count++] = pref;
}

static int same_move(const Move *a, const Move *b) {
    if (a->kind != b->kind) return 0;
    if (a->kind != SCOUT && (a->start != b->start || a->length != b->length)) return 0;
    if (a->kind != SHOW && (a->end != b->end || a->flip != b->flip || a->pos != b->pos)) return 0;
    return 1;
}

static PyObject *move_obj(const Move *m) {
    if (m->kind == SHOW) return show_obj(m->start, m->length);
    if (m->kind == SCOUT) return scout_obj(m->end, m->flip, m->pos);
    return sas_obj(m->end, m->flip, m->pos, m->start, m->length);
}

static int add(PyObject *out, const Move *m) {
    PyObject *obj = move_obj(m);
    return obj == NULL ? -1 : PyList_Append(out, obj);
}

/* Appends the k first of the highest prefs among moves[0:count] (a stable sort, descending,
 * cut at k), skipping `first`. */
static int add_top(PyObject *out, const Move *moves, const long *prefs, int count, int k,
                   const Move *first) {
    char taken[count > 0 ? count : 1];
    memset(taken, 0, sizeof taken);
    for (int round = 0; round < k && round < count; round++) {
        int best = -1;
        for (int i = 0; i < count; i++)
            if (!taken[i] && (best < 0 || prefs[i] > prefs[best])) best = i;
        taken[best] = 1;
        if (!same_move(&moves[best], first) && add(out, &moves[best]) < 0) return -1;
    }
    return 0;
}

static PyObject *candidates(const int *faces, int n, const int *aface, const int *aother,
                            int alen, int players, int token, int chips, int per_way,
                            int max_combos) {
    int starts[MAX_HAND * (MAX_HAND + 1)], lengths[MAX_HAND * (MAX_HAND + 1)];
    long akey = alen ? key_of(aface, alen) : NO_ACTIVE_SET;
    int shows = shows_of(faces, n, akey, starts, lengths);
    MoveList combos = {NULL, NULL, 0, 0};
    PyObject *out = NULL;
    if (alen && token) each_scout_and_show(aface, aother, alen, faces, n, 2, append_move, &combos);
    if (combos.count && (combos.moves == NULL || combos.count > combos.size)) goto no_memory;
    int may_scout = alen && (players > 2 || chips > 0);
    Move first;
    if (shows) {
        int best = 0;
        long best_pref = show_pref(key_of(faces + starts[0], lengths[0]));
        for (int k = 1; k < shows; k++) {
            long pref = show_pref(key_of(faces + starts[k], lengths[k]));
            if (pref > best_pref) {
                best = k;
                best_pref = pref;
            }
        }
        first = (Move){SHOW, starts[best], lengths[best], 0, 0, 0};
    } else {
        Best b = {-1, alen > 2 ? alen : 2, {0}};
        for (int i = 0; i < combos.count; i++) keep_best(&b, combos.prefs[i], &combos.moves[i]);
        if (b.best >= 0) {
            first = b.move;
        } else if (may_scout) {
            first = best_scout(aface, aother, alen, faces, n);
        } else {
            PyMem_Free(combos.moves);
            PyMem_Free(combos.prefs);
            Py_RETURN_NONE; /* no move the policy knows: the caller asks the engine */
        }
    }
    out = PyList_New(0);
    if (out == NULL || add(out, &first) < 0) goto fail;
    for (int k = 0; k < shows; k++) {
        Move m = {SHOW, starts[k], lengths[k], 0, 0, 0};
        if (!same_move(&m, &first) && add(out, &m) < 0) goto fail;
    }
    if (may_scout) {
        Move way[MAX_HAND + 1];
        long score[MAX_HAND + 1];
        int ends = alen == 1 ? 1 : 2;
        for (int end = 0; end < ends; end++) {
            int taken = (end == LEFT || alen == 1) ? 0 : alen - 1;
            for (int flip = 0; flip < 2; flip++) {
                int value = flip ? aother[taken] : aface[taken];
                for (int pos = 0; pos <= n; pos++) {
                    way[pos] = (Move){SCOUT, 0, 0, end, flip, pos};
                    score[pos] = fit(faces, n, pos, value) * 2 + (flip ? 0 : 1);
                }
                if (add_top(out, way, score, n + 1, per_way, &first) < 0) goto fail;
            }
        }
        if (players > 2 && combos.count &&
            add_top(out, combos.moves, combos.prefs, combos.count, max_combos, &first) < 0)
            goto fail;
    }
    PyMem_Free(combos.moves);
    PyMem_Free(combos.prefs);
    return out;
no_memory:
    PyErr_NoMemory();
fail:
    Py_XDECREF(out);
    PyMem_Free(combos.moves);
    PyMem_Free(combos.prefs);
    return NULL;
}

static PyObject *pl_candidates(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "candidates(faces, active, players, token, chips, "
                                         "scouts_per_way, max_combos)");
        return NULL;
    }
    if (Show_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "scout_rules._playout.setup() was not called");
        return NULL;
    }
    int faces[MAX_HAND], aface[MAX_HAND], aother[MAX_HAND];
    Py_ssize_t n = read_faces(args[0], faces);
    if (n == -1) return NULL;
    Py_ssize_t alen = read_cards(args[1], aface, aother);
    if (alen == -1) return NULL;
    if (n < 0 || alen < 0 || n + 2 >= MAX_HAND) Py_RETURN_NONE;
    long values[5];
    for (int i = 0; i < 5; i++) {
        values[i] = PyLong_AsLong(args[2 + i]);
        if (values[i] == -1 && PyErr_Occurred()) return NULL;
    }
    if (values[3] < 0 || values[4] < 0) Py_RETURN_NONE;
    return candidates(faces, (int)n, aface, aother, (int)alen, (int)values[0], (int)values[1],
                      (int)values[2], (int)values[3], (int)values[4]);
}

static PyObject *pl_setup(PyObject *self, PyObject *args) {
    PyObject *show, *scout, *sas, *left, *right;
    if (!PyArg_ParseTuple(args, "OOOOO", &show, &scout, &sas, &left, &right)) return NULL;
    if (Show_cls != NULL) Py_RETURN_NONE;
    PyObject *all[] = {show, scout, sas, left, right};
    for (int i = 0; i < 5; i++) Py_INCREF(all[i]);
    Show_cls = show;
    Scout_cls = scout;
    SAS_cls = sas;
    End_left = left;
    End_right = right;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", pl_setup, METH_VARARGS,
     "setup(Show, Scout, ScoutAndShow, End.LEFT, End.RIGHT): the types to build"},
    {"candidates", (PyCFunction)(void (*)(void))pl_candidates, METH_FASTCALL,
     "candidates(faces, active, players, token, chips, scouts_per_way, max_combos): "
     "playout.candidates; None when it must be asked of the Python function"},
    {"round_scores", (PyCFunction)(void (*)(void))pl_round_scores, METH_FASTCALL,
     "round_scores(n, hands, active, captured, chips, tokens, last_shower, scouts_since_show, "
     "current_seat, round_actions, max_actions): each seat's score for the round once the "
     "greedy policy has played it out; None when the round is beyond the arrays"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_playout",
    "Greedy playouts of one round in C (optional; see scout_rules.playout).", -1, methods,
};

PyMODINIT_FUNC PyInit__playout(void) { return PyModule_Create(&module); }
