/*
 * Tests for daemon/p2p/piece_choice.c, the rules of docs/swarm.md "Which piece, from whom" on
 * hand-made downloads: the rarest piece first, random among equals and at random while the
 * download opens; a parent's room; a seed kept for the pieces only it holds, but a slow holder
 * not waited for; avoided parents (the endgame's for good, a Busy one for a while); the
 * fastest parent per piece in flight; given-up parents not counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <string.h>

#include "p2p/piece_choice.h"

#define MAXP 8 /* pieces in these downloads */
#define SEED 0 /* parent 0 holds every piece in most of them */

struct dl {
    struct dfd_choice_parent parents[4];
    uint8_t state[MAXP];
    uint32_t have[MAXP];
    struct avoid avoid[MAXP];
    uint64_t rng;
    struct dfd_choice c;
};

/* n_parents usable parents, all measured equal, none holding anything; pieces missing. */
static void init(struct dl *d, size_t n_parents, uint32_t pieces) {
    memset(d, 0, sizeof(*d));
    for (size_t k = 0; k < n_parents; k++) {
        d->parents[k] = (struct dfd_choice_parent){.live = true, .usable = true, .rate = 1e6};
    }
    d->rng = 88172645463325252ULL;
    d->c = (struct dfd_choice){.parents = d->parents,
                               .n_parents = n_parents,
                               .state = d->state,
                               .have = d->have,
                               .avoid = d->avoid,
                               .piece_count = pieces,
                               .concurrent_piece_count = 8,
                               .now = 1000,
                               .rng = &d->rng};
}

static void hold(struct dl *d, size_t k, uint32_t piece) {
    d->have[piece] |= UINT32_C(1) << k;
    d->parents[k].n_have++;
}

static bool choose(struct dl *d, size_t *k, uint32_t *piece) {
    return dfd_choose_piece(&d->c, k, piece);
}

#define ANY UINT32_MAX

/* Asserts that a choice is made, from parent want_k, of piece want_p (ANY: whichever); returns
 * the piece. */
static uint32_t expect(struct dl *d, size_t want_k, uint32_t want_p) {
    size_t k = SIZE_MAX;
    uint32_t p = ANY;
    assert_true(choose(d, &k, &p));
    assert_int_equal(k, want_k);
    if (want_p != ANY) {
        assert_int_equal(p, want_p);
    }
    return p;
}

/* Two parents, four pieces: parent 0 holds every one, parent 1 pieces 0 to 2; rng seeded. */
static void three_shared(struct dl *d, uint64_t seed) {
    init(d, 2, 4);
    d->rng = seed;
    for (uint32_t i = 0; i < 4; i++) {
        hold(d, 0, i);
        if (i != 3) {
            hold(d, 1, i);
        }
    }
}

/* Piece 3 is held by one parent, the others by two: piece 3 comes first, whatever the seed. */
static void test_rarest_first(void **state) {
    (void)state;
    for (uint64_t seed = 1; seed < 50; seed++) {
        struct dl d;
        three_shared(&d, seed);
        expect(&d, 0, 3);
    }
}

/* Equal pieces are taken at random; while the download opens rarity is not counted. */
static void test_random_among_equals_and_opening(void **state) {
    (void)state;
    unsigned seen[4] = {0}, seen_open[4] = {0};
    for (uint64_t seed = 1; seed < 400; seed++) {
        struct dl d;
        three_shared(&d, seed); /* 0, 1, 2 held twice: equals */
        d.state[3] = PIECE_WRITTEN;
        size_t k;
        uint32_t p;
        assert_true(choose(&d, &k, &p));
        seen[p]++;
        d.state[3] = PIECE_MISSING;
        d.c.opening = true;
        assert_true(choose(&d, &k, &p));
        seen_open[p]++;
    }
    for (uint32_t i = 0; i < 3; i++) {
        assert_true(seen[i] > 50); /* about 133 each */
    }
    assert_int_equal(seen[3], 0);
    for (uint32_t i = 0; i < 4; i++) {
        assert_true(seen_open[i] > 40); /* about 100 each, the rarer one no more often */
    }
}

/* A seed holds every piece, A holds 0 and 1 (none only it); piece 2, only the seed's, is in
 * flight from it. Pieces 0 and 1 go to A, never to the seed, even once A has no room (they
 * wait for it); the seed gets piece 3, once missing. */
static void test_seed_kept_for_its_unique_pieces(void **state) {
    (void)state;
    struct dl d;
    init(&d, 2, 4);
    d.c.concurrent_piece_count = 4; /* room: 2 pieces per parent */
    for (uint32_t i = 0; i < 4; i++) {
        hold(&d, SEED, i);
    }
    hold(&d, 1, 0);
    hold(&d, 1, 1);
    d.state[2] = PIECE_INFLIGHT;
    d.parents[SEED].inflight = 1;
    d.state[3] = PIECE_WRITTEN;
    size_t k;
    uint32_t p;
    uint32_t first = expect(&d, 1, ANY);
    assert_true(first == 0 || first == 1);
    d.parents[1].inflight = 2; /* A is full: 0 and 1 wait for it */
    assert_false(choose(&d, &k, &p));
    d.state[3] = PIECE_MISSING; /* a piece only the seed holds: the seed's */
    expect(&d, SEED, 3);
}

/* As above, but A is measured at under half the seed's throughput: its pieces do not wait
 * for it. */
static void test_slow_holder_not_waited_for(void **state) {
    (void)state;
    struct dl d;
    init(&d, 2, 2);
    d.c.concurrent_piece_count = 4;
    hold(&d, SEED, 0);
    hold(&d, SEED, 1);
    hold(&d, 1, 0);
    d.parents[1].inflight = 2;   /* full */
    d.state[1] = PIECE_INFLIGHT; /* the seed's only unique piece, in flight from it */
    d.parents[SEED].inflight = 1;
    size_t k;
    uint32_t p;
    assert_false(choose(&d, &k, &p)); /* A as fast as the seed: piece 0 waits for A */
    d.parents[1].rate = 0.4e6;
    expect(&d, SEED, 0);
}

/* A parent with max(2, 8 / parents) pieces in flight, cooling down, or holding nothing gets no
 * piece. */
static void test_room(void **state) {
    (void)state;
    struct dl d;
    init(&d, 2, 4);
    for (uint32_t i = 0; i < 4; i++) {
        hold(&d, 0, i);
        hold(&d, 1, i);
    }
    size_t k;
    uint32_t p;
    d.parents[0].inflight = 4; /* cap 4 with two parents */
    expect(&d, 1, ANY);
    d.parents[1].inflight = 3;
    expect(&d, 1, ANY);
    d.parents[1].usable = false; /* cooling down */
    assert_false(choose(&d, &k, &p));
    d.parents[1].usable = true;
    d.parents[1].inflight = 4;
    assert_false(choose(&d, &k, &p));
}

/* The endgame's avoided parent is never asked for that piece; a Busy one only until its time. */
static void test_avoided_parents(void **state) {
    (void)state;
    struct dl d;
    init(&d, 2, 1);
    hold(&d, 0, 0);
    hold(&d, 1, 0);
    size_t k;
    uint32_t p;
    d.avoid[0] = (struct avoid){.parent = 1, .until_ns = 0}; /* parent 0, for good */
    for (int i = 0; i < 20; i++) {
        expect(&d, 1, ANY);
    }
    d.parents[1].usable = false;
    assert_false(choose(&d, &k, &p));
    d.avoid[0] = (struct avoid){.parent = 1, .until_ns = 2000}; /* Busy until 2000 */
    assert_false(choose(&d, &k, &p));
    d.c.now = 2000;
    expect(&d, 0, ANY);
}

/* Among holders alike, the best throughput per piece in flight; an unmeasured one counts as the
 * fastest. */
static void test_fastest_per_piece_in_flight(void **state) {
    (void)state;
    struct dl d;
    init(&d, 3, 1);
    for (size_t k = 0; k < 3; k++) {
        hold(&d, k, 0);
    }
    d.parents[0].rate = 10e6;
    d.parents[1].rate = 30e6;
    d.parents[2].rate = 20e6;
    expect(&d, 1, ANY);
    d.parents[1].inflight = 1; /* 15e6 per piece in flight: parent 2 is better */
    expect(&d, 2, ANY);
    d.parents[0].rate = 0; /* unmeasured: as fast as the fastest, nothing in flight */
    d.parents[2].inflight = 1;
    expect(&d, 0, ANY);
}

/* A given-up parent is neither asked nor counted: a piece only it holds is not taken, and its
 * copies do not make a piece less rare. */
static void test_given_up_parents(void **state) {
    (void)state;
    struct dl d;
    init(&d, 3, 3);
    hold(&d, 0, 0);
    hold(&d, 1, 0);
    hold(&d, 2, 0); /* piece 0: three holders, one given up */
    hold(&d, 0, 1);
    hold(&d, 1, 1); /* piece 1: two */
    hold(&d, 2, 2); /* piece 2: only the given-up one */
    d.parents[2].live = d.parents[2].usable = false;
    size_t k;
    unsigned seen[3] = {0};
    for (uint64_t seed = 1; seed < 100; seed++) {
        uint32_t p;
        d.rng = seed;
        assert_true(choose(&d, &k, &p));
        assert_true(k != 2);
        seen[p]++;
    }
    assert_true(seen[0] > 20 && seen[1] > 20); /* equally rare without parent 2 */
    assert_int_equal(seen[2], 0);
    d.parents[0].live = d.parents[0].usable = false;
    d.parents[1].live = d.parents[1].usable = false;
    uint32_t p;
    assert_false(choose(&d, &k, &p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rarest_first),
        cmocka_unit_test(test_random_among_equals_and_opening),
        cmocka_unit_test(test_seed_kept_for_its_unique_pieces),
        cmocka_unit_test(test_slow_holder_not_waited_for),
        cmocka_unit_test(test_room),
        cmocka_unit_test(test_avoided_parents),
        cmocka_unit_test(test_fastest_per_piece_in_flight),
        cmocka_unit_test(test_given_up_parents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
