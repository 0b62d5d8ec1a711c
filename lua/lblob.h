/* lblob.h — growable byte buffers for the binding
 *
 * What travels between Lua states (ltransport.h), JSON text (ljson.h),
 * cache files (lsweep_cache.h) and MPI messages (lsweep_mpi.h) is built
 * in a blob. Every function returns false when an allocation fails (the
 * out-of-memory policy of engine/sim.h); the caller raises the error.
 */
#ifndef KBSIM_LBLOB_H
#define KBSIM_LBLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

/* Deeper tables are almost surely a mistake, and each level costs C
 * stack (the value transport and JSON refuse them). */
#define LKB_MAX_DEPTH 200

struct lkb_blob {
    unsigned char *p;
    size_t n, cap;
};

bool lkb_blob_reserve(struct lkb_blob *b, size_t more);
bool lkb_blob_add(struct lkb_blob *b, const void *src, size_t n);
bool lkb_blob_str(struct lkb_blob *b, const char *s);
void lkb_blob_free(struct lkb_blob *b);
/* A buffer owned by a userdata pushed on the stack, so that an error
 * raised while filling it does not leak it. */
struct lkb_blob *lkb_newblob(lua_State *L);
/* Appends the whole file at path; false (errno set) if it cannot be
 * read or holds more than max bytes (EFBIG). */
bool lkb_blob_read_file(const char *path, struct lkb_blob *b, size_t max);

/* Little-endian 64-bit integers, whatever the host (byte formats that
 * other hosts or a later run read: ltransport.h, the MPI results). */
static inline void lkb_put_le64(unsigned char *d, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        d[i] = (unsigned char)(v >> (8 * i));
}

static inline uint64_t lkb_get_le64(const unsigned char *d)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)d[i] << (8 * i);
    return v;
}

#endif
