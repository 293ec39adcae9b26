// SPDX-License-Identifier: Apache-2.0
// spin: one thread computes for the seconds given (default 3): a
// single-threaded CPU-bound program. It runs on one core at a time, and
// that is no hotspot: there is nothing to spread.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3;
	double end = now() + secs;
	volatile unsigned long x = 1;
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005UL + 1442695040888963407UL;
	printf("%lu\n", (unsigned long)x);
	return 0;
}
