// SPDX-License-Identifier: Apache-2.0
// crunch MILLISECONDS: a short-lived program with one hot function,
// crunch_numbers, that runs for the milliseconds given (default 170) and
// exits. Built static and dynamic, it is what a symbolizer must name
// although the process is gone before the recorder's window closes.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long crunch_numbers(double until)
{
	unsigned long x = 1;
	while (now() < until)
		for (int i = 0; i < 20000; i++)
			x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

int main(int argc, char **argv)
{
	double ms = argc > 1 ? atof(argv[1]) : 170;
	printf("%lu\n", crunch_numbers(now() + ms / 1000));
	return 0;
}
