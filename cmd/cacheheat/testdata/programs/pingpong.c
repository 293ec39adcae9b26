// SPDX-License-Identifier: Apache-2.0
// pingpong: two processes pass one byte back and forth over two pipes,
// as fast as they can, for the seconds given (default 3). Each side spends
// nearly all its time blocked in read(2) on a pipe, waiting on its peer:
// the off-CPU reason is "ipc", never I/O. It prints the round trips.
// Given two CPUs after the seconds, the parent runs on the first and the
// child on the second: where the scheduler puts the two otherwise changes
// the rate by 10% and more between runs on a large host.
// With PINGPONG_EVERY_MS set, the parent also prints "at SECONDS TRIPS"
// (CLOCK_MONOTONIC, round trips so far) about that often, so that one
// long run can be cut into windows (bench/pingpong_toggle.py): windows of
// one run scatter less than separate runs do.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

// pin keeps the calling process on cpu; it fails the program if it cannot.
static void pin(const char *cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(atoi(cpu), &set);
	if (sched_setaffinity(0, sizeof set, &set)) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3;
	int ab[2], ba[2];
	char c = 0;
	if (pipe(ab) || pipe(ba)) {
		perror("pipe");
		return 1;
	}
	// Both CPUs are tried before the fork: a child that cannot pin would
	// leave the parent waiting on its pipe.
	if (argc > 3) {
		pin(argv[3]);
		pin(argv[2]);
	}
	pid_t child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (argc > 3 && child == 0)
		pin(argv[3]);
	// Each side keeps only its own ends: a side that dies closes the
	// other's read, which then ends it too.
	if (child == 0) {
		close(ab[1]);
		close(ba[0]);
		while (read(ab[0], &c, 1) == 1 && c)
			if (write(ba[1], &c, 1) != 1)
				return 1;
		return 0;
	}
	close(ab[0]);
	close(ba[1]);
	long trips = 0;
	double end = now() + secs;
	const char *every = getenv("PINGPONG_EVERY_MS");
	double step = every ? atof(every) / 1e3 : 0, next = now() + step;
	c = 1;
	for (double t = now(); t < end; t = now()) {
		if (step > 0 && t >= next) {
			printf("at %.6f %ld\n", t, trips);
			fflush(stdout);
			next = t + step;
		}
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 1;
		trips++;
	}
	c = 0;
	if (write(ab[1], &c, 1) != 1)
		return 1;
	waitpid(child, NULL, 0);
	printf("round trips: %ld (%.0f/s)\n", trips, trips / secs);
	return 0;
}
