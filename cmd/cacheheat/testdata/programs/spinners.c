// SPDX-License-Identifier: Apache-2.0
// spinners N SECONDS: N threads that compute for SECONDS. Pinned to one
// CPU (taskset) with another CPU idle, two or more of them are a core
// hotspot: they queue for one core while another has room.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double secs;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *spin(void *arg)
{
	double end = now() + secs;
	volatile unsigned long x = (unsigned long)arg;
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005UL + 1442695040888963407UL;
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2;
	secs = argc > 2 ? atof(argv[2]) : 3;
	pthread_t t[64];
	if (n < 1 || n > 64)
		return 2;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, spin, (void *)(long)i);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}
