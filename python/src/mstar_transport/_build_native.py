"""Builds mstar_transport._native: the few things Python cannot do itself on shared memory (atomics, fences,
the futex, open-file-description locks, writes into a mapping that fail into an error rather than SIGBUS when its
file was truncated). Run by setup.py at install time (cffi API mode)."""
from cffi import FFI

CDEF = """
int64_t mst_load_acquire64(uintptr_t address);
void mst_store_release64(uintptr_t address, int64_t value);
int32_t mst_load_acquire32(uintptr_t address);
void mst_store_release32(uintptr_t address, int32_t value);
int mst_cas64(uintptr_t address, int64_t expected, int64_t desired);
int32_t mst_exchange32(uintptr_t address, int32_t value);
void mst_full_fence(void);
void mst_acquire_fence(void);
void mst_release_fence(void);
int mst_futex_wait(uintptr_t address, int32_t expected, int64_t timeout_ns);
int mst_futex_wake(uintptr_t address);
int mst_ofd_lock(int fd, int64_t start, int64_t length, int lock_type);
int mst_ofd_locked(int fd, int64_t start, int64_t length);
void mst_copy(uintptr_t to, uintptr_t from, int64_t length);
void mst_zero(uintptr_t address, int64_t length);
int mst_ring_write(uintptr_t ring, int32_t capacity, int32_t type, const uint8_t *message, int32_t length,
                   int64_t *end);
int mst_ring_read(uintptr_t ring, int32_t capacity, int64_t *state, uint8_t *out, int32_t out_capacity,
                  int32_t limit, int32_t *records);
int mst_read_pass(uintptr_t ring, int32_t capacity, int64_t *state, uint8_t *out, int32_t out_capacity,
                  int32_t limit, int32_t *counts, const char *ns, int64_t *decoded, int32_t max_decoded);
int mst_decode_pass(const uint8_t *out, int32_t written, int32_t records, const char *ns, int64_t *decoded,
                    int32_t max_decoded, int32_t *covered);
int mst_guard_install(void);
int mst_guarded_copy(uintptr_t to, uintptr_t from, int64_t length, uintptr_t *fault);
int mst_guarded_stamp(uintptr_t address, int64_t msb, int64_t lsb, uintptr_t *fault);
"""

SOURCE = r"""
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <linux/futex.h>

/* Loads and stores of aligned words with the orderings the format names (docs/format.md, section 1). */
int64_t mst_load_acquire64(uintptr_t a) { return __atomic_load_n((int64_t *) a, __ATOMIC_ACQUIRE); }
void mst_store_release64(uintptr_t a, int64_t v) { __atomic_store_n((int64_t *) a, v, __ATOMIC_RELEASE); }
int32_t mst_load_acquire32(uintptr_t a) { return __atomic_load_n((int32_t *) a, __ATOMIC_ACQUIRE); }
void mst_store_release32(uintptr_t a, int32_t v) { __atomic_store_n((int32_t *) a, v, __ATOMIC_RELEASE); }

/* The ring's claim: compare-and-swap on the tail position. */
int mst_cas64(uintptr_t a, int64_t expected, int64_t desired) {
    return __atomic_compare_exchange_n((int64_t *) a, &expected, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* The doorbell's exchange: a full fence as well. */
int32_t mst_exchange32(uintptr_t a, int32_t v) { return __atomic_exchange_n((int32_t *) a, v, __ATOMIC_SEQ_CST); }

void mst_full_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void mst_acquire_fence(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }
void mst_release_fence(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }

/* A shared futex (the word is in a MAP_SHARED file): 0 when woken or the word differed, -1 with errno else. */
int mst_futex_wait(uintptr_t a, int32_t expected, int64_t timeout_ns) {
    struct timespec t = { timeout_ns / 1000000000LL, timeout_ns % 1000000000LL };
    long r = syscall(SYS_futex, (int32_t *) a, FUTEX_WAIT, expected, &t, NULL, 0);
    return r == 0 || errno == EAGAIN || errno == EINTR || errno == ETIMEDOUT ? 0 : -1;
}

int mst_futex_wake(uintptr_t a) { return (int) syscall(SYS_futex, (int32_t *) a, FUTEX_WAKE, INT_MAX, NULL, NULL, 0); }

/* Open-file-description locks on a byte range: 1 taken, 0 held by another, -1 with errno. */
int mst_ofd_lock(int fd, int64_t start, int64_t length, int lock_type) {
    struct flock l;
    memset(&l, 0, sizeof l);
    l.l_type = (short) lock_type;
    l.l_whence = SEEK_SET;
    l.l_start = start;
    l.l_len = length;
    if (fcntl(fd, F_OFD_SETLK, &l) == 0) return 1;
    return errno == EAGAIN || errno == EACCES ? 0 : -1;
}

/* Whether another open file holds a lock on any of the bytes: 1, 0, or -1 with errno. */
int mst_ofd_locked(int fd, int64_t start, int64_t length) {
    struct flock l;
    memset(&l, 0, sizeof l);
    l.l_type = F_WRLCK;
    l.l_whence = SEEK_SET;
    l.l_start = start;
    l.l_len = length;
    if (fcntl(fd, F_OFD_GETLK, &l) != 0) return -1;
    return l.l_type != F_UNLCK;
}

void mst_copy(uintptr_t to, uintptr_t from, int64_t n) { memcpy((void *) to, (const void *) from, (size_t) n); }
void mst_zero(uintptr_t a, int64_t n) { memset((void *) a, 0, (size_t) n); }

/*
 * Writes into this process's own mappings that a truncation of the file under them turns into an error, not a
 * SIGBUS (another process of the same user may truncate a segment: a bug or malice). While a thread runs a guarded
 * write, its own jump buffer is set; the SIGBUS handler jumps back there, so the write returns -1 with the faulting
 * address. Threads guard on their own buffers (thread-local, initial-exec so that the handler never allocates). A
 * SIGBUS outside a guarded write goes to the handler that was installed before (Python's faulthandler, or the
 * default action: the process dies as it would have).
 */
static __thread sigjmp_buf *guard_jump __attribute__((tls_model("initial-exec")));
static __thread uintptr_t guard_fault __attribute__((tls_model("initial-exec")));
static struct sigaction guard_previous;
static int guard_installed;

static void guard_handler(int signum, siginfo_t *info, void *context) {
    sigjmp_buf *jump = guard_jump;
    if (jump != NULL) {
        guard_jump = NULL;
        guard_fault = (uintptr_t) info->si_addr;
        siglongjmp(*jump, 1);
    }
    if (guard_previous.sa_flags & SA_SIGINFO) {
        guard_previous.sa_sigaction(signum, info, context);
    } else if (guard_previous.sa_handler != SIG_DFL && guard_previous.sa_handler != SIG_IGN) {
        guard_previous.sa_handler(signum);
    } else {
        signal(SIGBUS, SIG_DFL); /* the fault happens again on return, with the default action: the process dies */
    }
}

/* Installs the SIGBUS handler once (the caller holds the import lock): 0, or -1 with errno. */
int mst_guard_install(void) {
    if (guard_installed) return 0;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = guard_handler;
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK; /* no mask to restore: the jump needs no syscall */
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGBUS, &action, &guard_previous) != 0) return -1;
    guard_installed = 1;
    return 0;
}

/* memcpy into a mapping: 0, or -1 with *fault the address that faulted (the file ends before it). */
int mst_guarded_copy(uintptr_t to, uintptr_t from, int64_t n, uintptr_t *fault) {
    sigjmp_buf jump;
    if (sigsetjmp(jump, 0) != 0) {
        *fault = guard_fault;
        return -1;
    }
    guard_jump = &jump;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    memcpy((void *) to, (const void *) from, (size_t) n);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    guard_jump = NULL;
    return 0;
}

/* A slot's stamp (two release stores: docs/format.md, section 4), or its clearing with (0, 0) and a full fence. */
int mst_guarded_stamp(uintptr_t a, int64_t msb, int64_t lsb, uintptr_t *fault) {
    sigjmp_buf jump;
    if (sigsetjmp(jump, 0) != 0) {
        *fault = guard_fault;
        return -1;
    }
    guard_jump = &jump;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n((int64_t *) a, msb, __ATOMIC_RELEASE);
    __atomic_store_n((int64_t *) (a + 8), lsb, __ATOMIC_RELEASE);
    if (msb == 0 && lsb == 0) __atomic_thread_fence(__ATOMIC_SEQ_CST);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    guard_jump = NULL;
    return 0;
}

/* Agrona's many-to-one ring (docs/format.md, section 7): the trailer's fields follow the records. */
#define TAIL 128
#define HEAD_CACHE 256
#define HEAD 384
#define HEADER 8
#define PADDING_TYPE (-1)
#define LAST_TYPE 4 /* 1 descriptors, 2 ACKs, 3 refusals, 4 kept */
#define OUT_HEADER 16 /* what mst_ring_read puts before each message: i32 type, i32 length, i64 end position */
#define ALIGN8(n) (((n) + 7) & ~7)

static int32_t *word32(uintptr_t ring, int32_t index) { return (int32_t *) (ring + (uint32_t) index); }
static int64_t *word64(uintptr_t ring, int32_t capacity, int32_t field) { return (int64_t *) (ring + (uint32_t) capacity + field); }

/*
 * Writes one record as Agrona's ManyToOneRingBuffer.write does: 1 written, 0 no room now, -1 too long. On 1, *end is
 * the record's end position (docs/format.md, section 7): the claimed tail plus any padding plus its aligned length,
 * which the reader's handled position passes once it handled the record (section 12a).
 */
int mst_ring_write(uintptr_t ring, int32_t capacity, int32_t type, const uint8_t *message, int32_t length,
                   int64_t *end) {
    if (length < 0 || length > capacity / 8 || type < 1) return -1;
    int32_t record_length = length + HEADER;
    int32_t required = ALIGN8(record_length);
    int64_t *tail_at = word64(ring, capacity, TAIL);
    int64_t *head_cache_at = word64(ring, capacity, HEAD_CACHE);
    int64_t *head_at = word64(ring, capacity, HEAD);
    int32_t mask = capacity - 1;
    int64_t head = __atomic_load_n(head_cache_at, __ATOMIC_ACQUIRE);
    int64_t tail;
    int32_t tail_index, padding;
    do {
        tail = __atomic_load_n(tail_at, __ATOMIC_ACQUIRE);
        if (required > capacity - (int32_t) (tail - head)) {
            head = __atomic_load_n(head_at, __ATOMIC_ACQUIRE);
            if (required > capacity - (int32_t) (tail - head)) return 0;
            __atomic_store_n(head_cache_at, head, __ATOMIC_RELEASE);
        }
        padding = 0;
        tail_index = (int32_t) tail & mask;
        int32_t to_end = capacity - tail_index;
        if (required > to_end) {
            int32_t head_index = (int32_t) head & mask;
            if (required > head_index) {
                head = __atomic_load_n(head_at, __ATOMIC_ACQUIRE);
                head_index = (int32_t) head & mask;
                if (required > head_index) return 0;
                __atomic_store_n(head_cache_at, head, __ATOMIC_RELEASE);
            }
            padding = to_end;
        }
    } while (!__atomic_compare_exchange_n(tail_at, &tail, tail + required + padding, 0, __ATOMIC_SEQ_CST,
                                          __ATOMIC_SEQ_CST));
    if (padding != 0) {
        __atomic_store_n(word32(ring, tail_index), -padding, __ATOMIC_RELEASE);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        *word32(ring, tail_index + 4) = PADDING_TYPE;
        __atomic_store_n(word32(ring, tail_index), padding, __ATOMIC_RELEASE);
        tail_index = 0;
    }
    __atomic_store_n(word32(ring, tail_index), -record_length, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy((void *) (ring + (uint32_t) tail_index + HEADER), message, (size_t) length);
    *word32(ring, tail_index + 4) = type;
    __atomic_store_n(word32(ring, tail_index), record_length, __ATOMIC_RELEASE);
    *end = tail + padding + required;
    return 1;
}

static int known_type(int32_t type, int32_t length) {
    return (type >= 1 && type <= LAST_TYPE) || type == PADDING_TYPE || (length < 0 && type == 0);
}

static int fits(int64_t length, int64_t remaining) {
    return length >= HEADER && length <= remaining && ALIGN8(length) <= remaining;
}

static int32_t next_header(uintptr_t ring, int32_t from, int32_t end) {
    for (int32_t q = from; q < end; q += 8) {
        int32_t length = __atomic_load_n(word32(ring, q), __ATOMIC_ACQUIRE);
        int32_t magnitude = length < 0 ? -length : length;
        if (length != 0 && fits(magnitude, end - q) && known_type(*word32(ring, q + 4), length)) return q;
    }
    return -1;
}

/*
 * Reads published records as the JVM's RingReader does, believing no length: records of types 1..4 are copied to
 * `out` as (i32 type, i32 length, i64 end position, bytes padded to 8), the end position being the head just past
 * the record (what the handled position passes, section 12a); padding and unknown types are skipped; garbage is
 * stepped over to the next possible header. Read space is zeroed and the head released. state: [0] the reader's
 * own head, [1] 1 while a resync stopped on zeros, [2] records skipped, [3] bytes skipped. Returns the bytes written
 * to `out`; *records, how many records.
 */
int mst_ring_read(uintptr_t ring, int32_t capacity, int64_t *state, uint8_t *out, int32_t out_capacity,
                  int32_t limit, int32_t *records) {
    int64_t head = state[0];
    int32_t head_index = (int32_t) head & (capacity - 1);
    *records = 0;
    if (__atomic_load_n(word32(ring, head_index), __ATOMIC_ACQUIRE) == 0 && !state[1]) return 0;
    int64_t claimed = __atomic_load_n(word64(ring, capacity, TAIL), __ATOMIC_ACQUIRE) - head;
    if (claimed <= 0) return 0;
    int32_t end = (int32_t) (claimed < capacity - head_index ? claimed : capacity - head_index);
    int32_t read = 0, written = 0;
    while (read < end && *records < limit) {
        int32_t index = head_index + read;
        int32_t remaining = end - read;
        int32_t length = __atomic_load_n(word32(ring, index), __ATOMIC_ACQUIRE);
        if (length == 0 && state[1]) {
            int32_t next = next_header(ring, index, head_index + end);
            if (next < 0) break;
            state[2]++; state[3] += next - index;
            read += next - index;
            state[1] = 0;
            continue;
        }
        if (length == 0 || (length < 0 && fits(-(int64_t) length, remaining))) break; /* claimed, not yet published */
        int32_t type = *word32(ring, index + 4);
        if (!fits(length, remaining)) {
            int32_t q = next_header(ring, index + 8, head_index + end);
            if (q < 0) {
                q = index + 8;
                while (q < head_index + end && __atomic_load_n(word32(ring, q), __ATOMIC_ACQUIRE) != 0) q += 8;
                state[1] = q < head_index + end;
            }
            state[2]++; state[3] += q - index;
            read += q - index;
            continue;
        }
        if (type >= 1 && type <= LAST_TYPE) {
            if (written + OUT_HEADER + ALIGN8(length - HEADER) > out_capacity) break; /* the rest next time */
            memcpy(out + written, &type, 4);
            int32_t body = length - HEADER;
            memcpy(out + written + 4, &body, 4);
            int64_t end_position = head + read + ALIGN8(length);
            memcpy(out + written + 8, &end_position, 8);
            memcpy(out + written + OUT_HEADER, (const void *) (ring + (uint32_t) index + HEADER), (size_t) body);
            written += OUT_HEADER + ALIGN8(body);
            (*records)++;
        } else if (type != PADDING_TYPE) {
            state[2]++; state[3] += ALIGN8(length);
        }
        read += ALIGN8(length);
        state[1] = 0;
    }
    if (read > 0) {
        memset((void *) (ring + (uint32_t) head_index), 0, (size_t) read);
        head += read;
        state[0] = head;
        __atomic_store_n(word64(ring, capacity, HEAD), head, __ATOMIC_RELEASE);
    }
    return written;
}

/*
 * The descriptors messages of a pass, decoded and checked here rather than in Python: the same checks, in the same
 * order, naming the same first bad field as format.py's decode_message and decode_descriptor (docs/format.md,
 * sections 8 and 9; the tests hold the two to each other). Each record is DECODED_WORDS int64s: msb, lsb, nbytes,
 * offset, shape[8], message (its message's index in the pass), error (0, a FIELD_* code, or FRAMING: the message's
 * framing failed and none of it is believed), then the offsets in `out` and lengths of requestId, producer and
 * fileName, dtype, placement, rank, flags.
 */
#define DECODED_WORDS 24
#define SHAPE_AT 48
#define MAX_RANK 8
#define MAX_RECORD (SHAPE_AT + 8 * MAX_RANK + 3 * (2 + 256))
#define FRAMING (-1)
enum { FIELD_MAGIC = 1, FIELD_VERSION, FIELD_RESERVED, FIELD_FLAGS, FIELD_LENGTH, FIELD_DTYPE, FIELD_PLACEMENT,
       FIELD_RANK, FIELD_SHAPE, FIELD_NBYTES, FIELD_OFFSET, FIELD_REQUEST_ID, FIELD_PRODUCER, FIELD_FILE_NAME };
static const int64_t ITEM_BYTES[15] = {0, 4, 2, 2, 8, 1, 1, 2, 4, 8, 1, 1, 1, 1, 1};

static int entity_char(uint8_t c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.'
        || c == '-';
}

static int entity(const uint8_t *s, int32_t n) {
    if (n < 1 || n > 64 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return 0;
    for (int32_t i = 0; i < n; i++) if (!entity_char(s[i])) return 0;
    return 1;
}

static int lower_hex(const uint8_t *s, int32_t n) {
    for (int32_t i = 0; i < n; i++) if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* Python's strict UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. */
static int utf8(const uint8_t *s, int32_t n) {
    int32_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        int32_t more;
        uint8_t low = 0x80, high = 0xBF;
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xC2 && c <= 0xDF) more = 1;
        else if (c == 0xE0) { more = 2; low = 0xA0; }
        else if (c >= 0xE1 && c <= 0xEC) more = 2;
        else if (c == 0xED) { more = 2; high = 0x9F; }
        else if (c >= 0xEE && c <= 0xEF) more = 2;
        else if (c == 0xF0) { more = 3; low = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) more = 3;
        else if (c == 0xF4) { more = 3; high = 0x8F; }
        else return 0;
        if (i + more > n - 1) return 0; /* truncated */
        if (s[i + 1] < low || s[i + 1] > high) return 0;
        for (int32_t k = 2; k <= more; k++) if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
        i += more + 1;
    }
    return 1;
}

/* A segment (or spill file) name of namespace ns, as format.py's is_ours: parsed from both ends (section 2). */
static int ours(const char *ns, const uint8_t *s, int32_t n, int spill) {
    if (n < 29 || memcmp(s, "mstar_", 6) != 0 || memcmp(s + 6, ns, 16) != 0 || !lower_hex(s + 6, 16)) return 0;
    if (memcmp(s + 22, spill ? "_spill_" : "_arena_", 7) != 0) return 0;
    int32_t entity_end;
    if (spill) {
        if (n < 29 + 1 + 1 + 8 + 1 + 32 || !lower_hex(s + n - 32, 32) || s[n - 33] != '_') return 0;
        entity_end = n - 33 - 9;
    } else {
        int32_t q = n - 1;
        while (q >= 29 && s[q] >= '0' && s[q] <= '9') q--;
        int32_t digits = n - 1 - q;
        if (digits < 1 || digits > 10 || q < 29 || s[q] != '_') return 0;
        entity_end = q - 9;
    }
    if (entity_end < 30 || s[entity_end] != '_' || !lower_hex(s + entity_end + 1, 8)) return 0;
    return entity(s + 29, entity_end - 29);
}

static int64_t i64_at(const uint8_t *p) { int64_t v; memcpy(&v, p, 8); return v; }
static uint32_t u32_at(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint16_t u16_at(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* One record of `length` bytes at `at` of `out` (its message's checks passed): its fields and first bad field. */
static void decode_record(const uint8_t *out, int32_t at, int32_t length, const char *ns, int64_t *d) {
    const uint8_t *r = out + at;
    memset(d, 0, DECODED_WORDS * 8);
    int64_t *error = &d[13];
    if (length < SHAPE_AT) { *error = FIELD_LENGTH; return; }
    if (u32_at(r) != 0x4454534D) { *error = FIELD_MAGIC; return; }
    if (u16_at(r + 4) != 2) { *error = FIELD_VERSION; return; }
    if (u16_at(r + 6) != 0) { *error = FIELD_RESERVED; return; }
    uint8_t dtype = r[12], placement = r[13], rank = r[14], flags = r[15];
    if (flags & ~1) { *error = FIELD_FLAGS; return; }
    if (u32_at(r + 8) != (uint32_t) length) { *error = FIELD_LENGTH; return; }
    if (dtype < 1 || dtype > 14) { *error = FIELD_DTYPE; return; }
    if (placement != 1 && placement != 2) { *error = FIELD_PLACEMENT; return; }
    if (rank > MAX_RANK) { *error = FIELD_RANK; return; }
    int32_t p = SHAPE_AT + 8 * rank;
    if (p + 6 > length) { *error = FIELD_SHAPE; return; }
    unsigned __int128 elements = 1;
    for (int i = 0; i < rank; i++) {
        int64_t dim = i64_at(r + SHAPE_AT + 8 * i);
        if (dim < 0) { *error = FIELD_SHAPE; return; }
        elements *= (uint64_t) dim;
        if (elements >= ((unsigned __int128) 1 << 63)) { *error = FIELD_SHAPE; return; }
        d[4 + i] = dim;
    }
    int64_t nbytes = i64_at(r + 32), offset = i64_at(r + 40);
    unsigned __int128 expected = elements * (uint64_t) ITEM_BYTES[dtype];
    if (expected >= ((unsigned __int128) 1 << 63) || nbytes < 0 || (unsigned __int128) nbytes != expected) {
        *error = FIELD_NBYTES; return;
    }
    if (offset < 0 || offset > INT64_MAX - nbytes) { *error = FIELD_OFFSET; return; }
    if (placement == 2 && offset != 0) { *error = FIELD_OFFSET; return; }
    static const int32_t limits[3] = {256, 64, 255};
    static const int32_t fields[3] = {FIELD_REQUEST_ID, FIELD_PRODUCER, FIELD_FILE_NAME};
    for (int k = 0; k < 3; k++) {
        if (p + 2 > length) { *error = fields[k]; return; }
        int32_t n = u16_at(r + p);
        p += 2;
        if (n > limits[k] || p + n > length) { *error = fields[k]; return; }
        const uint8_t *s = r + p;
        if (k == 0 && !utf8(s, n)) { *error = fields[k]; return; }  /* requestId: UTF-8 */
        if (k > 0) for (int32_t i = 0; i < n; i++) if (s[i] >= 0x80) { *error = fields[k]; return; }  /* ASCII */
        d[14 + 2 * k] = at + p;
        d[15 + 2 * k] = n;
        p += n;
    }
    if (p != length) { *error = FIELD_LENGTH; return; }
    if (!entity(out + d[16], (int32_t) d[17])) { *error = FIELD_PRODUCER; return; }
    if (!ours(ns, out + d[18], (int32_t) d[19], placement == 2)) { *error = FIELD_FILE_NAME; return; }
    d[0] = i64_at(r + 16);
    d[1] = i64_at(r + 24);
    d[2] = nbytes;
    d[3] = offset;
    d[20] = dtype;
    d[21] = placement;
    d[22] = rank;
    d[23] = flags;
}

/*
 * Decodes the descriptors messages among the `records` messages mst_ring_read left in `out`, into `decoded`, for as
 * many records as `max_decoded` holds: a message that does not fit whole is left (with every one after it) to the
 * caller's own decoder. Returns how many records were decoded; *covered, how many messages (the first ones) were.
 */
int mst_decode_pass(const uint8_t *out, int32_t written, int32_t records, const char *ns, int64_t *decoded,
                    int32_t max_decoded, int32_t *covered) {
    int32_t p = 0, count = 0, m;
    for (m = 0; m < records && p + OUT_HEADER <= written; m++) {
        int32_t type = (int32_t) u32_at(out + p), length = (int32_t) u32_at(out + p + 4);
        int32_t body = p + OUT_HEADER;
        p = body + ALIGN8(length);
        if (type != 1) continue;
        const uint8_t *b = out + body;
        int framing = length < 1;
        int32_t n = framing ? 0 : b[0];
        if (!framing) framing = n == 0 || n > 64 || length < 1 + n + 2 || !entity(b + 1, n);
        int32_t items = framing ? 0 : u16_at(b + 1 + n);
        int32_t q = 1 + n + 2;
        for (int32_t k = 0; k < items && !framing; k++) {  /* each record's own length frames it (section 8) */
            int32_t available = length - q;
            if (available < SHAPE_AT) { framing = 1; break; }
            uint32_t declared = u32_at(b + q + 8);
            if (declared < SHAPE_AT + 6 || declared > MAX_RECORD || declared > (uint32_t) available) {
                framing = 1; break;
            }
            q += (int32_t) declared;
        }
        if (!framing && q != length) framing = 1;
        if (count + (framing ? 1 : items) > max_decoded) break;
        if (framing) {
            int64_t *d = decoded + (int64_t) count * DECODED_WORDS;
            memset(d, 0, DECODED_WORDS * 8);
            d[12] = m;
            d[13] = FRAMING;
            count++;
            continue;
        }
        q = 1 + n + 2;
        for (int32_t k = 0; k < items; k++) {
            int32_t declared = (int32_t) u32_at(b + q + 8);
            int64_t *d = decoded + (int64_t) count * DECODED_WORDS;
            decode_record(out, body + q, declared, ns, d);
            d[12] = m;
            count++;
            q += declared;
        }
    }
    *covered = m;
    return count;
}

/*
 * One receive pass's reading in one call: mst_ring_read, then mst_decode_pass over what it read. counts: [0] the
 * messages read, [1] the records decoded, [2] the messages those cover. Returns the bytes written to `out`.
 */
int mst_read_pass(uintptr_t ring, int32_t capacity, int64_t *state, uint8_t *out, int32_t out_capacity,
                  int32_t limit, int32_t *counts, const char *ns, int64_t *decoded, int32_t max_decoded) {
    int32_t written = mst_ring_read(ring, capacity, state, out, out_capacity, limit, &counts[0]);
    counts[1] = counts[2] = 0;
    if (counts[0]) counts[1] = mst_decode_pass(out, written, counts[0], ns, decoded, max_decoded, &counts[2]);
    return written;
}
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source("mstar_transport._native", SOURCE, extra_compile_args=["-O2", "-D_GNU_SOURCE"])

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
