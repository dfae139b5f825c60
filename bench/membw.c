/*
 * Memory read bandwidth, the physical limit of LLM decode on a CPU: every generated token reads every
 * weight once. THREADS threads (the caller among them) each sum their own contiguous slice of one
 * BYTES-byte buffer, PASSES times; a pass is timed from a barrier that releases them all to a barrier
 * that waits for the last. The buffer is written first by the thread that later reads each slice, so
 * its pages are real memory (an untouched page reads as the shared zero page, from cache) and sit near
 * that thread. Eight independent accumulators let the compiler issue wide vector loads, as llama.cpp's
 * kernels do. Prints one JSON line: {"threads","bytes","passesGBps":[...],"checksum"}.
 *
 * Built and run by bench/physical-limit.ts: cc -O3 -march=native -pthread membw.c -o membw
 * Usage: membw BYTES THREADS PASSES
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
  uint64_t *p;
  size_t n;
  int passes;
  uint64_t sum;
} slice_t;

static pthread_barrier_t barrier;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t read_slice(const uint64_t *p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0, e = 0, f = 0, g = 0, h = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
    e += p[i + 4];
    f += p[i + 5];
    g += p[i + 6];
    h += p[i + 7];
  }
  for (; i < n; i++) a += p[i];
  return a + b + c + d + e + f + g + h;
}

static void *worker(void *arg) {
  slice_t *s = (slice_t *)arg;
  for (size_t i = 0; i < s->n; i++) s->p[i] = i * 2654435761u;
  for (int pass = 0; pass < s->passes; pass++) {
    pthread_barrier_wait(&barrier);
    s->sum += read_slice(s->p, s->n);
    pthread_barrier_wait(&barrier);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s BYTES THREADS PASSES\n", argv[0]);
    return 2;
  }
  size_t bytes = strtoull(argv[1], NULL, 10);
  int threads = atoi(argv[2]);
  int passes = atoi(argv[3]);
  if (bytes < 4096 || threads < 1 || threads > 1024 || passes < 1 || passes > 10000) {
    fprintf(stderr, "BYTES >= 4096, THREADS 1..1024, PASSES 1..10000\n");
    return 2;
  }
  size_t words = bytes / sizeof(uint64_t);
  uint64_t *buf = NULL;
  if (posix_memalign((void **)&buf, 4096, words * sizeof(uint64_t)) != 0) {
    fprintf(stderr, "cannot allocate %zu bytes\n", bytes);
    return 1;
  }
  slice_t *slices = calloc((size_t)threads, sizeof(slice_t));
  pthread_t *ids = calloc((size_t)threads, sizeof(pthread_t));
  pthread_barrier_init(&barrier, NULL, (unsigned)threads);
  size_t per = words / (size_t)threads;
  for (int t = 0; t < threads; t++) {
    slices[t].p = buf + per * (size_t)t;
    slices[t].n = t == threads - 1 ? words - per * (size_t)t : per;
    slices[t].passes = passes;
  }
  for (int t = 1; t < threads; t++) pthread_create(&ids[t], NULL, worker, &slices[t]);

  /* The caller is thread 0: it fills its slice, then times each pass between the two barriers. */
  slice_t *own = &slices[0];
  for (size_t i = 0; i < own->n; i++) own->p[i] = i * 2654435761u;
  double *gbps = calloc((size_t)passes, sizeof(double));
  for (int pass = 0; pass < passes; pass++) {
    pthread_barrier_wait(&barrier);
    double start = now_s();
    own->sum += read_slice(own->p, own->n);
    pthread_barrier_wait(&barrier);
    gbps[pass] = (double)(words * sizeof(uint64_t)) / (now_s() - start) / 1e9;
  }
  uint64_t checksum = own->sum;
  for (int t = 1; t < threads; t++) {
    pthread_join(ids[t], NULL);
    checksum += slices[t].sum;
  }
  printf("{\"threads\":%d,\"bytes\":%zu,\"passesGBps\":[", threads, words * sizeof(uint64_t));
  for (int pass = 0; pass < passes; pass++) printf("%s%.3f", pass ? "," : "", gbps[pass]);
  printf("],\"checksum\":\"%llu\"}\n", (unsigned long long)checksum);
  return 0;
}
