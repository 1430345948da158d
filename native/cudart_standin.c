/*
 * A CPU stand-in for the subset of the CUDA runtime API that mstar-transport uses, for tests on
 * machines without a GPU. It is loaded through the same JNA binding as the real libcudart.
 *
 * Semantics that the tests rely on:
 *  - "device memory" is ordinary host memory (cudaMalloc is malloc);
 *  - each stream has a worker thread that runs its operations in order;
 *  - cudaMemcpyAsync enqueues a copy that runs after a configurable delay
 *    (mstarStandinSetCopyDelayUs), so an unsynchronized reader sees stale bytes;
 *  - an event recorded on a stream completes only when every operation enqueued before it ran;
 *  - cudaHostRegister answers cudaErrorHostMemoryAlreadyRegistered (712) for a registered range.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int cudaError_t;
enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorHostMemoryAlreadyRegistered = 712,
    cudaErrorHostMemoryNotRegistered = 713,
};

typedef struct event {
    pthread_mutex_t lock;
    pthread_cond_t done;
    long pending; /* records not yet reached by their stream */
} event_t;

typedef struct op {
    struct op *next;
    void *dst;
    const void *src;
    size_t count;
    long delay_us;
    event_t *event; /* non-null: an event record */
} op_t;

typedef struct stream {
    pthread_mutex_t lock;
    pthread_cond_t work;
    op_t *head, *tail;
    int stopping;
    pthread_t worker;
} stream_t;

static volatile long copy_delay_us = 0;
static volatile long copies_started = 0;
static volatile long copies_done = 0;
static volatile long event_syncs = 0;
static volatile long default_stream_syncs = 0;

void mstarStandinSetCopyDelayUs(long us) { copy_delay_us = us; }
long mstarStandinCopiesDone(void) { return __atomic_load_n(&copies_done, __ATOMIC_SEQ_CST); }
long mstarStandinCopiesStarted(void) { return __atomic_load_n(&copies_started, __ATOMIC_SEQ_CST); }
long mstarStandinEventSyncs(void) { return __atomic_load_n(&event_syncs, __ATOMIC_SEQ_CST); }
long mstarStandinDefaultStreamSyncs(void) { return __atomic_load_n(&default_stream_syncs, __ATOMIC_SEQ_CST); }

static void sleep_us(long us) {
    if (us > 0) {
        struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
        }
    }
}

static void *run_stream(void *arg) {
    stream_t *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (!s->head && !s->stopping) {
            pthread_cond_wait(&s->work, &s->lock);
        }
        if (!s->head && s->stopping) {
            pthread_mutex_unlock(&s->lock);
            return NULL;
        }
        op_t *op = s->head;
        s->head = op->next;
        if (!s->head) {
            s->tail = NULL;
        }
        pthread_mutex_unlock(&s->lock);
        if (op->event) {
            pthread_mutex_lock(&op->event->lock);
            op->event->pending--;
            pthread_cond_broadcast(&op->event->done);
            pthread_mutex_unlock(&op->event->lock);
        } else {
            __atomic_add_fetch(&copies_started, 1, __ATOMIC_SEQ_CST);
            sleep_us(op->delay_us);
            memcpy(op->dst, op->src, op->count);
            __atomic_add_fetch(&copies_done, 1, __ATOMIC_SEQ_CST);
        }
        free(op);
    }
}

static void enqueue(stream_t *s, op_t *op) {
    pthread_mutex_lock(&s->lock);
    if (s->tail) {
        s->tail->next = op;
    } else {
        s->head = op;
    }
    s->tail = op;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
}

cudaError_t cudaGetDeviceCount(int *count) { *count = 1; return cudaSuccess; }
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return cudaSuccess; }

cudaError_t cudaStreamCreateWithFlags(void **stream, unsigned int flags) {
    (void) flags;
    stream_t *s = calloc(1, sizeof(stream_t));
    if (!s) {
        return cudaErrorMemoryAllocation;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work, NULL);
    pthread_create(&s->worker, NULL, run_stream, s);
    *stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(void *stream) {
    stream_t *s = stream;
    if (!s) {
        return cudaErrorInvalidResourceHandle;
    }
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->worker, NULL); /* runs what was enqueued first */
    free(s);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, int kind, void *stream) {
    (void) kind;
    if (!stream || (!dst && count) || (!src && count)) {
        return cudaErrorInvalidValue;
    }
    op_t *op = calloc(1, sizeof(op_t));
    op->dst = dst;
    op->src = src;
    op->count = count;
    op->delay_us = copy_delay_us;
    enqueue(stream, op);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, int kind) {
    (void) kind;
    memcpy(dst, src, count);
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(void **event, unsigned int flags) {
    (void) flags;
    event_t *e = calloc(1, sizeof(event_t));
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->done, NULL);
    *event = e;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(void *event, void *stream) {
    event_t *e = event;
    if (!e || !stream) {
        return cudaErrorInvalidResourceHandle;
    }
    pthread_mutex_lock(&e->lock);
    e->pending++;
    pthread_mutex_unlock(&e->lock);
    op_t *op = calloc(1, sizeof(op_t));
    op->event = e;
    enqueue(stream, op);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(void *event) {
    event_t *e = event;
    pthread_mutex_lock(&e->lock);
    long pending = e->pending;
    pthread_mutex_unlock(&e->lock);
    return pending ? cudaErrorNotReady : cudaSuccess;
}

static void wait_event(event_t *e) {
    pthread_mutex_lock(&e->lock);
    while (e->pending) {
        pthread_cond_wait(&e->done, &e->lock);
    }
    pthread_mutex_unlock(&e->lock);
}

/* Counted: tests check that a batch send waits once. */
cudaError_t cudaEventSynchronize(void *event) {
    __atomic_add_fetch(&event_syncs, 1, __ATOMIC_SEQ_CST);
    wait_event(event);
    return cudaSuccess;
}

/* The stand-in runs no work on the legacy default stream (NULL): syncing it only counts, for tests. */
cudaError_t cudaStreamSynchronize(void *stream) {
    if (stream) {
        return cudaErrorInvalidResourceHandle; /* the library syncs only the default stream */
    }
    __atomic_add_fetch(&default_stream_syncs, 1, __ATOMIC_SEQ_CST);
    return cudaSuccess;
}

cudaError_t cudaEventDestroy(void *event) {
    event_t *e = event;
    wait_event(e); /* the stand-in frees the event, so it must not be pending */
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->done);
    free(e);
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size) {
    *ptr = malloc(size ? size : 1);
    return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *ptr) { free(ptr); return cudaSuccess; }

/* Registered ranges: a small table is enough for tests. */
#define MAX_REGISTERED 4096
static pthread_mutex_t registered_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t registered[MAX_REGISTERED];
static size_t registered_bytes[MAX_REGISTERED];

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags) {
    (void) flags;
    cudaError_t result = cudaErrorMemoryAllocation;
    pthread_mutex_lock(&registered_lock);
    for (int i = 0; i < MAX_REGISTERED; i++) {
        if (registered[i] == (uintptr_t) ptr) {
            result = cudaErrorHostMemoryAlreadyRegistered;
            goto out;
        }
    }
    for (int i = 0; i < MAX_REGISTERED; i++) {
        if (!registered[i]) {
            registered[i] = (uintptr_t) ptr;
            registered_bytes[i] = size;
            result = cudaSuccess;
            goto out;
        }
    }
out:
    pthread_mutex_unlock(&registered_lock);
    return result;
}

cudaError_t cudaHostUnregister(void *ptr) {
    cudaError_t result = cudaErrorHostMemoryNotRegistered;
    pthread_mutex_lock(&registered_lock);
    for (int i = 0; i < MAX_REGISTERED; i++) {
        if (registered[i] == (uintptr_t) ptr) {
            registered[i] = 0;
            registered_bytes[i] = 0;
            result = cudaSuccess;
            break;
        }
    }
    pthread_mutex_unlock(&registered_lock);
    return result;
}

/* How many ranges are registered now (tests check that unmapping unregisters). */
long mstarStandinRegisteredRanges(void) {
    long n = 0;
    pthread_mutex_lock(&registered_lock);
    for (int i = 0; i < MAX_REGISTERED; i++) {
        n += registered[i] != 0;
    }
    pthread_mutex_unlock(&registered_lock);
    return n;
}

const char *cudaGetErrorName(cudaError_t error) {
    switch (error) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        case cudaErrorNotReady: return "cudaErrorNotReady";
        case cudaErrorHostMemoryAlreadyRegistered: return "cudaErrorHostMemoryAlreadyRegistered";
        case cudaErrorHostMemoryNotRegistered: return "cudaErrorHostMemoryNotRegistered";
        default: return "cudaErrorUnknown";
    }
}

const char *cudaGetErrorString(cudaError_t error) {
    switch (error) {
        case cudaSuccess: return "no error";
        case cudaErrorNotReady: return "device not ready";
        case cudaErrorHostMemoryAlreadyRegistered: return "part or all of the requested memory range is already mapped";
        case cudaErrorHostMemoryNotRegistered: return "pointer does not correspond to a registered memory region";
        default: return "stand-in error";
    }
}
