/* test_evq.c — the timed queue pops in time order */
#include "evq.h"
#include "test.h"

/* A queue on the heap, so that the harness can release it after a test
 * stops early (test.h, T_OWN). */
static struct evq *q_new(void)
{
    struct evq *q = malloc(sizeof *q);
    if (q)
        evq_init(q);
    return q;
}

static void q_free(struct evq *q)
{
    evq_release(q);
    free(q);
}

TEST(pops_in_key_order)
{
    struct evq *q = T_OWN(q_new(), q_free);
    ASSERT_TRUE(q);
    uint64_t x = 1;
    uint64_t seq = 0;
    /* mix monotone runs (FIFO side) with random keys (heap side) */
    for (int i = 0; i < 20000; i++) {
        uint64_t t;
        if (i % 3 == 0) {
            t = 1000000 + (uint64_t)i;
        } else {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            t = (x >> 33) % 1000;
        }
        struct evq_entry e = {t, seq++, NULL, 0, (uint32_t)i};
        ASSERT_TRUE(evq_push(q, &e));
    }
    ASSERT_EQ(evq_size(q), 20000);
    struct evq_entry prev = {0}, cur;
    int n = 0;
    while (evq_pop(q, &cur)) {
        if (n)
            ASSERT_TRUE(prev.t <= cur.t);
        prev = cur;
        n++;
    }
    ASSERT_TRUE(!evq_nomem(q)); /* a pop that could not reorganise */
    ASSERT_EQ(n, 20000);
    ASSERT_TRUE(evq_peek(q) == NULL);
    T_FREE(q_free, q);
}

TEST(interleaved_push_pop)
{
    struct evq *q = T_OWN(q_new(), q_free);
    ASSERT_TRUE(q);
    uint64_t seq = 0, now = 0, x = 7;
    for (int i = 0; i < 100; i++) {
        struct evq_entry e = {(uint64_t)i % 10, seq++, NULL, 0, 0};
        ASSERT_TRUE(evq_push(q, &e));
    }
    struct evq_entry cur;
    for (int i = 0; i < 50000; i++) {
        ASSERT_TRUE(evq_pop(q, &cur));
        ASSERT_TRUE(cur.t >= now);
        now = cur.t;
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        struct evq_entry e = {now + 1 + (x >> 33) % 100, seq++, NULL, 0, 0};
        ASSERT_TRUE(evq_push(q, &e));
    }
    ASSERT_EQ(evq_size(q), 100);
    T_FREE(q_free, q);
}

/* An entry earlier than the radix heap's last minimum (as pushed between
 * two runs) goes to the side heap; the three heads still merge in order. */
TEST(entries_before_the_radix_floor)
{
    struct evq *q = T_OWN(q_new(), q_free);
    ASSERT_TRUE(q);
    uint64_t seq = 0;
    uint64_t ts[] = {100, 50, 70};
    for (int i = 0; i < 3; i++) {
        struct evq_entry e = {ts[i], seq++, NULL, 0, 0};
        ASSERT_TRUE(evq_push(q, &e));
    }
    struct evq_entry cur;
    ASSERT_TRUE(evq_pop(q, &cur));
    ASSERT_U64_EQ(cur.t, 50); /* the radix floor is now 50 */
    uint64_t more[] = {40, 60, 45, 200};
    for (int i = 0; i < 4; i++) {
        struct evq_entry e = {more[i], seq++, NULL, 0, 0};
        ASSERT_TRUE(evq_push(q, &e));
    }
    uint64_t want[] = {40, 45, 60, 70, 100, 200};
    for (int i = 0; i < 6; i++) {
        ASSERT_TRUE(evq_pop(q, &cur));
        ASSERT_U64_EQ(cur.t, want[i]);
    }
    ASSERT_TRUE(!evq_pop(q, &cur));
    ASSERT_EQ(evq_size(q), 0);
    T_FREE(q_free, q);
}

/* evq_pop_at takes the head only at the time asked for; a push of an
 * earlier entry after a peek changes what the next pop returns. */
TEST(pop_at_and_the_remembered_head)
{
    struct evq *q = T_OWN(q_new(), q_free);
    ASSERT_TRUE(q);
    uint64_t ts[] = {30, 10, 20, 10};
    for (int i = 0; i < 4; i++) {
        struct evq_entry e = {ts[i], (uint64_t)i, NULL, 0, 0};
        ASSERT_TRUE(evq_push(q, &e));
    }
    struct evq_entry cur;
    ASSERT_TRUE(!evq_pop_at(q, 20, &cur));
    ASSERT_TRUE(evq_pop_at(q, 10, &cur));
    ASSERT_U64_EQ(cur.t, 10);
    ASSERT_TRUE(evq_pop_at(q, 10, &cur));
    ASSERT_U64_EQ(cur.t, 10);
    ASSERT_TRUE(!evq_pop_at(q, 10, &cur));
    ASSERT_U64_EQ(evq_peek(q)->t, 20); /* head remembered: 20 */
    struct evq_entry early = {15, 9, NULL, 0, 0};
    ASSERT_TRUE(evq_push(q, &early));
    ASSERT_U64_EQ(evq_peek(q)->t, 15);
    uint64_t want[] = {15, 20, 30};
    for (int i = 0; i < 3; i++) {
        ASSERT_TRUE(evq_pop(q, &cur));
        ASSERT_U64_EQ(cur.t, want[i]);
    }
    ASSERT_TRUE(!evq_pop_at(q, 30, &cur));
    ASSERT_TRUE(evq_peek(q) == NULL);
    T_FREE(q_free, q);
}

/* A simulation-like run: pop the minimum, push it again a random delay
 * later; the delays' scale changes from phase to phase, so the wheel's
 * bucket width must follow (narrower for picosecond delays, wider for
 * milliseconds), and every pop must still come out in time order. */
static unsigned run_phase(struct evq *q, uint64_t *now, uint64_t *x,
                          uint64_t *seq, uint64_t max_delay, int steps)
{
    struct evq_entry cur;
    for (int i = 0; i < steps; i++) {
        if (!evq_pop(q, &cur) || cur.t < *now)
            return 0;
        *now = cur.t;
        *x = *x * 6364136223846793005ull + 1442695040888963407ull;
        struct evq_entry e = {*now + 1 + (*x >> 33) % max_delay, (*seq)++,
                              NULL, 0, 0};
        if (!evq_push(q, &e))
            return 0;
    }
    return q->wshift;
}

TEST(wheel_width_follows_the_delays)
{
    struct evq *q = T_OWN(q_new(), q_free);
    ASSERT_TRUE(q);
    uint64_t now = 0, x = 3, seq = 0;
    for (int i = 0; i < 1000; i++) {
        struct evq_entry e = {(uint64_t)(i * 7919 % 1000) * 1000, seq++,
                              NULL, 0, 0};
        ASSERT_TRUE(evq_push(q, &e));
    }
    unsigned ns = run_phase(q, &now, &x, &seq, 1000000, 50000);
    ASSERT_TRUE(ns >= 9 && ns <= 11); /* ~1 ns buckets for 1 us delays */
    unsigned ps = run_phase(q, &now, &x, &seq, 50, 50000);
    ASSERT_TRUE(ps > 0 && ps < 5);    /* a few ps for delays under 50 ps */
    unsigned ms = run_phase(q, &now, &x, &seq, 1000000000, 50000);
    ASSERT_TRUE(ms > 18);              /* wide for delays up to 1 ms */
    ASSERT_EQ(evq_size(q), 1000);
    struct evq_entry prev = {0}, cur;
    for (int n = 0; evq_pop(q, &cur); n++) {
        ASSERT_TRUE(cur.t >= prev.t);
        prev = cur;
    }
    ASSERT_TRUE(!evq_nomem(q));
    ASSERT_EQ(evq_size(q), 0);
    T_FREE(q_free, q);
}

/* Random pushes, peeks, pops and pops-at against a plain list: the head
 * the queue remembers between calls must always be the minimum, whatever
 * structure a push lands in (FIFO, wheel, radix heap, side heap). */
TEST(remembered_head_against_a_list)
{
    enum { MAXN = 3000 };
    static uint64_t ref[MAXN];
    size_t n = 0;
    struct evq *q = T_OWN(q_new(), q_free);
    ASSERT_TRUE(q);
    uint64_t x = 11, seq = 0, now = 0;
    for (int step = 0; step < 200000; step++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        unsigned op = (unsigned)(x >> 60);
        uint64_t r = x >> 20;
        if (op < 9 && n < MAXN) {
            uint64_t t;
            switch (op % 4) {
            case 0: t = now; break;                       /* same time */
            case 1: t = now + r % 64; break;              /* ps ahead */
            case 2: t = now + r % 2000000; break;         /* us ahead */
            default: t = now + (r % 4 == 0 ? 0 : r % 100000000000ull);
            }
            if (op == 6 && now > 10)
                t = now - r % 10; /* earlier than now: the side heap */
            struct evq_entry e = {t, seq++, NULL, 0, 0};
            ASSERT_TRUE(evq_push(q, &e));
            ref[n++] = t;
        } else if (n == 0) {
            ASSERT_TRUE(evq_peek(q) == NULL);
        } else {
            size_t m = 0;
            for (size_t i = 1; i < n; i++)
                if (ref[i] < ref[m])
                    m = i;
            const struct evq_entry *h = evq_peek(q);
            ASSERT_TRUE(h != NULL);
            ASSERT_U64_EQ(h->t, ref[m]);
            struct evq_entry cur;
            if (op < 11) {
                ASSERT_TRUE(evq_pop(q, &cur));
            } else {
                ASSERT_TRUE(!evq_pop_at(q, ref[m] + 1, &cur));
                ASSERT_TRUE(evq_pop_at(q, ref[m], &cur));
            }
            ASSERT_U64_EQ(cur.t, ref[m]);
            ref[m] = ref[--n];
            if (cur.t > now)
                now = cur.t;
        }
        ASSERT_EQ(evq_size(q), n);
    }
    T_FREE(q_free, q);
}

/* evq_pop_fifo_at: entries of one time at the head of a FIFO-only queue
 * come out in insertion order; another time, or any other structure in
 * use, makes it decline and change nothing. */
TEST(pop_fifo_at)
{
    struct evq *q = T_OWN(q_new(), q_free);
    ASSERT_TRUE(q);
    uint64_t seq = 0;
    for (int i = 0; i < 6; i++) { /* 3 at t = 10, 3 at t = 20 */
        struct evq_entry e = {i < 3 ? 10u : 20u, seq++, NULL, 0, (uint32_t)i};
        ASSERT_TRUE(evq_push(q, &e));
    }
    struct evq_entry out;
    ASSERT_TRUE(!evq_pop_fifo_at(q, 20, &out)); /* the head is at 10 */
    ASSERT_EQ(evq_size(q), 6);
    for (uint32_t i = 0; i < 3; i++) {
        ASSERT_TRUE(evq_pop_fifo_at(q, 10, &out));
        ASSERT_EQ(out.gen, i);
    }
    ASSERT_TRUE(!evq_pop_fifo_at(q, 10, &out));
    ASSERT_EQ(evq_peek(q)->t, 20); /* the remembered head is right */
    /* an entry earlier than the FIFO's tail goes to another structure */
    struct evq_entry early = {15, seq++, NULL, 0, 99};
    ASSERT_TRUE(evq_push(q, &early));
    ASSERT_TRUE(!evq_pop_fifo_at(q, 20, &out));
    ASSERT_TRUE(evq_pop(q, &out));
    ASSERT_EQ(out.gen, 99);
    for (uint32_t i = 3; i < 6; i++) {
        ASSERT_TRUE(evq_pop(q, &out));
        ASSERT_EQ(out.gen, i);
    }
    ASSERT_TRUE(!evq_pop(q, &out));
    ASSERT_TRUE(!evq_pop_fifo_at(q, 20, &out));
    T_FREE(q_free, q);
}

/* evq_fifo_run_at / evq_fifo_at / evq_fifo_drop: the scheduler walks the
 * FIFO's run of one time in place and then drops it; the queue is then as
 * after as many evq_pop_fifo_at calls (the remembered head, the floor: an
 * earlier push after it goes elsewhere and still comes out first). */
TEST(fifo_run_in_place)
{
    struct evq *q = T_OWN(q_new(), q_free);
    ASSERT_TRUE(q);
    uint64_t seq = 0;
    ASSERT_EQ(evq_fifo_run_at(q, 10), 0); /* empty */
    for (int i = 0; i < 7; i++) { /* 4 at t = 10, 3 at t = 20 */
        struct evq_entry e = {i < 4 ? 10u : 20u, seq++, NULL, 0, (uint32_t)i};
        ASSERT_TRUE(evq_push(q, &e));
    }
    ASSERT_EQ(evq_fifo_run_at(q, 20), 0); /* the head is at 10 */
    size_t n = evq_fifo_run_at(q, 10), i = 0;
    ASSERT_EQ(n, 7); /* every FIFO entry, the caller stops at the time */
    for (; i < n && evq_fifo_at(q, i)->t == 10; i++)
        ASSERT_EQ(evq_fifo_at(q, i)->gen, i);
    ASSERT_EQ(i, 4);
    evq_fifo_drop(q, i, 10);
    ASSERT_EQ(evq_size(q), 3);
    ASSERT_EQ(evq_peek(q)->t, 20);
    ASSERT_EQ(evq_fifo_run_at(q, 20), 3);
    /* an entry earlier than the FIFO's tail goes to another structure:
     * no run in place then */
    struct evq_entry early = {15, seq++, NULL, 0, 99};
    ASSERT_TRUE(evq_push(q, &early));
    ASSERT_EQ(evq_fifo_run_at(q, 15), 0);
    ASSERT_EQ(evq_fifo_run_at(q, 20), 0);
    struct evq_entry out;
    ASSERT_TRUE(evq_pop(q, &out));
    ASSERT_EQ(out.gen, 99);
    for (uint32_t g = 4; g < 7; g++) {
        ASSERT_TRUE(evq_pop(q, &out));
        ASSERT_EQ(out.gen, g);
    }
    ASSERT_TRUE(!evq_pop(q, &out));
    T_FREE(q_free, q);
}

/* Entries of one time come out of the wheel and the radix heap in the
 * order they went in (the scheduler then need not sort them), whatever
 * other times are pushed between them; evq_pop_wheel_at takes them while
 * the wheel is the only structure in use. */
TEST(equal_times_keep_insertion_order)
{
    struct evq *q = T_OWN(q_new(), q_free);
    ASSERT_TRUE(q);
    uint64_t x = 7, seq = 0;
    /* a first entry later than the rest makes the rest go to the wheel */
    struct evq_entry first = {100000, seq++, NULL, 0, 0};
    ASSERT_TRUE(evq_push(q, &first));
    struct evq_entry dummy;
    for (int i = 0; i < 6000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        /* 40 distinct times in the wheel's window, and a few far ones */
        uint64_t t = i % 97 == 0 ? 5000000000ull + (x >> 40) % 3 : 200000 + ((x >> 33) % 40) * 1000;
        struct evq_entry e = {t, seq++, NULL, 0, 0};
        ASSERT_TRUE(evq_push(q, &e));
    }
    ASSERT_TRUE(evq_pop(q, &dummy));
    ASSERT_U64_EQ(dummy.t, 100000);
    struct evq_entry prev = {0}, cur;
    size_t n = 1;
    while (evq_pop(q, &cur)) {
        ASSERT_TRUE(cur.t > prev.t || (cur.t == prev.t && cur.seq > prev.seq));
        prev = cur;
        n++;
    }
    ASSERT_TRUE(!evq_nomem(q)); /* a pop that could not reorganise */
    ASSERT_EQ(n, 6001);

    /* the wheel alone: pop_wheel_at takes a time's entries in order, and
     * refuses another time or a queue with other structures in use */
    evq_release(q);
    evq_init(q);
    seq = 0;
    /* 1000 goes to the FIFO, 500 (earlier) to the wheel, and from then on
     * every entry to the wheel */
    struct evq_entry a = {1000, seq++, NULL, 0, 0}, b = {500, seq++, NULL, 0, 0};
    ASSERT_TRUE(evq_push(q, &a));
    ASSERT_TRUE(evq_push(q, &b));
    for (int i = 0; i < 50; i++) {
        struct evq_entry e = {(uint64_t)(i % 2 ? 3000 : 2000), seq++, NULL, 0, 0};
        ASSERT_TRUE(evq_push(q, &e));
    }
    ASSERT_TRUE(!evq_pop_wheel_at(q, 500, &cur)); /* the FIFO is in use */
    ASSERT_TRUE(evq_pop(q, &cur));
    ASSERT_U64_EQ(cur.t, 500);
    ASSERT_TRUE(evq_pop(q, &cur));
    ASSERT_U64_EQ(cur.t, 1000);
    ASSERT_TRUE(!evq_pop_wheel_at(q, 3000, &cur));
    uint64_t last = 0;
    for (int i = 0; i < 25; i++) {
        ASSERT_TRUE(evq_pop_wheel_at(q, 2000, &cur));
        ASSERT_U64_EQ(cur.t, 2000);
        ASSERT_TRUE(cur.seq > last);
        last = cur.seq;
    }
    ASSERT_TRUE(!evq_pop_wheel_at(q, 2000, &cur));
    last = 0;
    for (int i = 0; i < 25; i++) {
        ASSERT_TRUE(evq_pop_wheel_at(q, 3000, &cur));
        ASSERT_TRUE(cur.seq > last);
        last = cur.seq;
    }
    ASSERT_EQ(evq_size(q), 0);
    ASSERT_TRUE(!evq_pop_wheel_at(q, 3000, &cur));
}

TEST_MAIN(pops_in_key_order, interleaved_push_pop, entries_before_the_radix_floor,
          pop_at_and_the_remembered_head, wheel_width_follows_the_delays,
          remembered_head_against_a_list, pop_fifo_at, fifo_run_in_place,
          equal_times_keep_insertion_order)
