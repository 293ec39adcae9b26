// An independent core-to-core latency measure, to check cacheheat probe's
// matrix against (bench/probe.sh): the same compare-and-swap ping-pong
// as nviennot/core-to-core-latency, in C with pthreads. For each ordered
// pair (from, to) of the CPUs given, thread "from" swaps 2k to 2k+1 and
// thread "to" swaps 2k+1 to 2k+2 on one cache line in a page of its own
// that "from" touches first. Prints "from to median_ns min_ns max_ns",
// one line transfer per number, median over ROUNDS rounds of EXCHANGES
// exchanges (a first, warming round dropped).
//
//   cc -O2 -pthread -o c2c c2c.c && ./c2c 0 1 2 3
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define ROUNDS 11
#define EXCHANGES 10000

static volatile uint64_t *line;
static volatile int b_ready, a_touched;
static double times[ROUNDS];

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (pthread_setaffinity_np(pthread_self(), sizeof(s), &s)) {
		perror("pthread_setaffinity_np");
		exit(1);
	}
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void spin(uint64_t want)
{
	uint64_t w;
	do {
		w = want;
	} while (!__atomic_compare_exchange_n(line, &w, want + 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
}

struct arg { int cpu; };

static void *from_thread(void *p)
{
	pin(((struct arg *)p)->cpu);
	*line = 0; // first touch: the page lands on this CPU's node
	__atomic_store_n(&a_touched, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&b_ready, __ATOMIC_SEQ_CST))
		;
	uint64_t k = 0;
	for (int r = 0; r <= ROUNDS; r++) {
		double t0 = now_ns();
		for (int i = 0; i < EXCHANGES; i++, k++)
			spin(2 * k);
		if (r > 0)
			times[r - 1] = (now_ns() - t0) / (2.0 * EXCHANGES);
	}
	return NULL;
}

static void *to_thread(void *p)
{
	pin(((struct arg *)p)->cpu);
	while (!__atomic_load_n(&a_touched, __ATOMIC_SEQ_CST))
		;
	__atomic_store_n(&b_ready, 1, __ATOMIC_SEQ_CST);
	for (uint64_t k = 0; k < (uint64_t)(ROUNDS + 1) * EXCHANGES; k++)
		spin(2 * k + 1);
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int n = argc - 1;
	int *cpus = calloc(n, sizeof(int));
	for (int i = 0; i < n; i++)
		cpus[i] = atoi(argv[i + 1]);
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < n; j++) {
			if (i == j)
				continue;
			void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (page == MAP_FAILED) {
				perror("mmap");
				return 1;
			}
			line = page;
			b_ready = a_touched = 0;
			struct arg a = {cpus[i]}, b = {cpus[j]};
			pthread_t ta, tb;
			pthread_create(&tb, NULL, to_thread, &b);
			pthread_create(&ta, NULL, from_thread, &a);
			pthread_join(ta, NULL);
			pthread_join(tb, NULL);
			munmap(page, 4096);
			qsort(times, ROUNDS, sizeof(double), cmp);
			printf("%d %d %.2f %.2f %.2f\n", cpus[i], cpus[j], times[ROUNDS / 2], times[0], times[ROUNDS - 1]);
			fflush(stdout);
		}
	}
	return 0;
}
