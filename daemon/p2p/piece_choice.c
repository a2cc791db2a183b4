/*
 * piece_choice.c - the next piece of a P2P download and its parent (piece_choice.h).
 */
#include "p2p/piece_choice.h"

#include <string.h>

uint64_t dfd_choice_rand(uint64_t *rng) {
    uint64_t x = *rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    return x;
}

static uint32_t bit(size_t k) {
    return UINT32_C(1) << k;
}

/* The parent (as a bit) piece i is not to be asked from now, or 0. */
static uint32_t avoided(const struct dfd_choice *c, uint32_t i) {
    const struct avoid *a = &c->avoid[i];
    bool on = a->parent != 0 && (a->until_ns == 0 || c->now < a->until_ns);
    return on ? bit(a->parent - 1U) : 0;
}

static double fastest_rate(const struct dfd_choice *c) {
    double fastest = 0;
    for (size_t k = 0; k < c->n_parents; k++) {
        fastest = c->parents[k].rate > fastest ? c->parents[k].rate : fastest;
    }
    return fastest;
}

/* The live parents with room for one more piece now. */
static uint32_t with_room(const struct dfd_choice *c, uint32_t live) {
    unsigned n_live = (unsigned)__builtin_popcount(live);
    unsigned cap = (unsigned)((c->concurrent_piece_count + n_live - 1) / n_live);
    cap = cap < 2 ? 2 : cap;
    uint32_t room = 0;
    for (size_t k = 0; k < c->n_parents; k++) {
        const struct dfd_choice_parent *pa = &c->parents[k];
        if ((live & bit(k)) != 0 && pa->usable && pa->inflight < cap && pa->n_have > 0) {
            room |= bit(k);
        }
    }
    return room;
}

/* Per live parent, the pieces still needed (in flight too) that only it holds (unique[k]);
 * returns the live parents with none that are not slow. */
static uint32_t without_unique(const struct dfd_choice *c, uint32_t live,
                               unsigned unique[DFD_CHOICE_MAX_PARENTS]) {
    memset(unique, 0, DFD_CHOICE_MAX_PARENTS * sizeof(*unique));
    for (uint32_t i = 0; i < c->piece_count; i++) {
        uint32_t held = c->have[i] & live;
        if (c->state[i] != PIECE_WRITTEN && __builtin_popcount(held) == 1) {
            unique[__builtin_ctz(held)]++;
        }
    }
    double fastest = fastest_rate(c);
    uint32_t none = 0;
    for (size_t k = 0; k < c->n_parents; k++) {
        double rate = c->parents[k].rate > 0 ? c->parents[k].rate : fastest;
        none |= unique[k] == 0 && rate >= fastest / 2 ? bit(k) : 0;
    }
    return none & live;
}

/* Of the parents in from, the one with the fewest unique pieces, then the best throughput per
 * piece in flight. */
static size_t best_parent(const struct dfd_choice *c, uint32_t from, const unsigned *unique) {
    double fastest = fastest_rate(c);
    size_t pick = SIZE_MAX;
    double pick_score = 0;
    for (size_t k = 0; k < c->n_parents; k++) {
        if ((from & bit(k)) == 0) {
            continue;
        }
        const struct dfd_choice_parent *pa = &c->parents[k];
        double rate = pa->rate > 0 ? pa->rate : (fastest > 0 ? fastest : 1);
        /* A little noise: equal parents take turns. */
        double noise = 1 + (double)(dfd_choice_rand(c->rng) % 64) / 1024;
        double score = rate / (pa->inflight + 1) * noise;
        if (pick == SIZE_MAX || unique[k] < unique[pick] ||
            (unique[k] == unique[pick] && score > pick_score)) {
            pick = k;
            pick_score = score;
        }
    }
    return pick;
}

bool dfd_choose_piece(const struct dfd_choice *c, size_t *ret_k, uint32_t *ret_piece) {
    if (c->n_parents == 0 || c->n_parents > DFD_CHOICE_MAX_PARENTS) {
        return false;
    }
    uint32_t live = 0;
    for (size_t k = 0; k < c->n_parents; k++) {
        live |= c->parents[k].live ? bit(k) : 0;
    }
    uint32_t room = live != 0 ? with_room(c, live) : 0;
    if (room == 0) {
        return false;
    }
    unsigned unique[DFD_CHOICE_MAX_PARENTS];
    uint32_t common = without_unique(c, live, unique);
    int best = DFD_CHOICE_MAX_PARENTS + 1;
    uint64_t ties = 0;
    uint32_t piece = 0, piece_from = 0;
    for (uint32_t i = 0; i < c->piece_count; i++) {
        if (c->state[i] != PIECE_MISSING) {
            continue;
        }
        uint32_t held = c->have[i] & live;
        uint32_t from = held & room & ~avoided(c, i);
        from &= (held & common) != 0 ? common : ~UINT32_C(0);
        if (from == 0) {
            continue;
        }
        int rarity = c->opening ? 0 : __builtin_popcount(held);
        if (rarity < best) {
            best = rarity;
            ties = 0;
        }
        if (rarity == best && dfd_choice_rand(c->rng) % ++ties == 0) {
            piece = i; /* reservoir sampling: each of the ties with chance 1/ties */
            piece_from = from;
        }
    }
    if (ties == 0) {
        return false;
    }
    *ret_k = best_parent(c, piece_from, unique);
    *ret_piece = piece;
    return true;
}
