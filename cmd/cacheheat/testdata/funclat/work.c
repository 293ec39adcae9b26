// The C program of the --func tests: main calls work() exactly N times
// (argv[1]) and prints the number of calls that returned. The mode
// (argv[2]) says what the calls do:
//
//   fault    one call in 50 touches 4 MiB of fresh memory, page by page
//            (huge pages off, so each page is a fault); the others compute
//   flat     every call computes the same
//   tiny     every call computes ~100 ns: what probes add shows
//   recurse  every 10th call recurses 5 levels (work calls work): N + N/10*5
//            calls return
//   longjmp  every 10th call longjmps out of work and never returns
//
// With "wait" as argv[3] it reads one byte from stdin before the first
// call, so tools can attach first, and another before it exits, so they
// can read their state while it lives. Two more output lines give the
// loop's wall time (loop_ns) and CPU time (loop_cpu_ns: the thread's own,
// which includes the probes' traps and leaves out time preempted), for
// bench/funclat.sh.
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BIG (4 << 20)

static volatile unsigned long sink;
static const char *mode = "fault";
static jmp_buf escape;
static long returned;

__attribute__((noinline)) void work(int i, int depth)
{
	if (strcmp(mode, "fault") == 0 && i % 50 == 49) {
		char *p = mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		madvise(p, BIG, MADV_NOHUGEPAGE);
		for (long off = 0; off < BIG; off += 4096)
			p[off] = 1;
		munmap(p, BIG);
		returned++;
		return;
	}
	if (strcmp(mode, "recurse") == 0 && i % 10 == 0 && depth < 5)
		work(i, depth + 1);
	if (strcmp(mode, "longjmp") == 0 && i % 10 == 0)
		longjmp(escape, 1);
	unsigned long x = i;
	int iters = strcmp(mode, "tiny") == 0 ? 100 : 20000;
	for (int j = 0; j < iters; j++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	sink = x;
	returned++;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	if (argc > 2)
		mode = argv[2];
	int wait = argc > 3 && strcmp(argv[3], "wait") == 0;
	if (wait) {
		char c;
		if (read(0, &c, 1) < 0)
			return 1;
	}
	struct timespec t0, t1, c0, c1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	for (volatile int i = 0; i < n; i++) {
		if (setjmp(escape) == 0)
			work(i, 0);
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%ld\nloop_ns %lld\nloop_cpu_ns %lld\n", returned,
	       (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec),
	       (c1.tv_sec - c0.tv_sec) * 1000000000LL + (c1.tv_nsec - c0.tv_nsec));
	fflush(stdout);
	if (wait) {
		char c;
		if (read(0, &c, 1) < 0)
			return 1;
	}
	return 0;
}
