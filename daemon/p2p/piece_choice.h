/*
 * piece_choice.h - which missing piece a P2P download's next worker fetches, and from which
 * parent (docs/swarm.md, "Which piece, from whom"). Plain data in, a choice out: no locks, no
 * I/O, no allocation, so the rules are tested on their own (test_piece_choice.c). The swarm
 * (download_round.c) calls it under its lock, describing its parents and pieces.
 *
 * The rules: the piece is the rarest missing one (held by the fewest live parents) that a
 * parent with room holds, random among equals; all count as equal while the download opens,
 * so a crowd that starts together asks a seed for different pieces. A parent has room when it
 * is usable and holds something, with fewer than max(2, concurrent_piece_count / live parents)
 * pieces in flight. A piece is not asked from a parent holding unique pieces (needed pieces
 * that only it holds) while another holder has none and is not slow (measured at under half
 * the fastest parent's throughput): the piece waits for room there, and the seed of a flash
 * crowd, whose uplink every node wants, is kept for the pieces nobody else has. A piece's
 * avoided parent (the endgame's, or one that answered Busy) is not asked for it. Among the
 * holders left, the parent is the one with the fewest unique pieces, then the best throughput
 * per piece in flight (an unmeasured one counts as the fastest), with a little noise so that
 * equal parents take turns.
 *
 * Ownership: every pointer in struct dfd_choice is borrowed for the call.
 */
#ifndef DFD_P2P_PIECE_CHOICE_H
#define DFD_P2P_PIECE_CHOICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parents one choice can tell apart: a bit each in a piece's holders. */
#define DFD_CHOICE_MAX_PARENTS 32

/* A piece's state in a download. */
enum piece_state { PIECE_MISSING, PIECE_INFLIGHT, PIECE_WRITTEN };

/* A parent a missing piece is not asked from: the one the endgame took it from, until the piece
 * is taken again; or one that answered Busy for it, until until_ns. */
struct avoid {
    uint8_t parent;   /* 1 + its index among the parents; 0: none */
    int64_t until_ns; /* monotonic; 0: until the piece is taken again */
};

/* A parent as the choice sees it. */
struct dfd_choice_parent {
    bool live;         /* not given up: its pieces count */
    bool usable;       /* may be given a piece now (live, not cooling down, address known) */
    unsigned inflight; /* pieces being fetched from it */
    uint32_t n_have;   /* pieces it reported */
    double rate;       /* bytes per second of its pieces (EWMA); 0: none measured yet */
};

struct dfd_choice {
    const struct dfd_choice_parent *parents; /* n_parents, at most DFD_CHOICE_MAX_PARENTS */
    size_t n_parents;
    const uint8_t *state;      /* per piece, enum piece_state */
    const uint32_t *have;      /* per piece: a bit per parent that reported it */
    const struct avoid *avoid; /* per piece */
    uint32_t piece_count;
    size_t concurrent_piece_count; /* the download's workers */
    bool opening;                  /* the first pieces: at random, rarity not counted */
    int64_t now;                   /* monotonic ns, against avoid's until_ns */
    uint64_t *rng;                 /* xorshift64 state, non-zero; advanced */
};

/* The next (parent, piece) by the rules above; false when nothing may be taken now. */
bool dfd_choose_piece(const struct dfd_choice *c, size_t *ret_k, uint32_t *ret_piece);

/* The next number of a xorshift64 state (non-zero). */
uint64_t dfd_choice_rand(uint64_t *rng);

#endif /* DFD_P2P_PIECE_CHOICE_H */
