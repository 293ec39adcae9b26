// SPDX-License-Identifier: Apache-2.0
// sleepers N SECONDS: N threads that each sleep 20 ms at a time, waking
// to do almost nothing, for SECONDS. Many threads, all sleeping: no CPU
// saturation, whatever their number.
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static double secs;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *sleeper(void *arg)
{
	(void)arg;
	double end = now() + secs;
	struct timespec ts = {.tv_nsec = 20 * 1000 * 1000};
	while (now() < end)
		nanosleep(&ts, NULL);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 64;
	secs = argc > 2 ? atof(argv[2]) : 3;
	if (n < 1 || n > 4096)
		return 2;
	pthread_t *t = calloc(n, sizeof(*t));
	if (!t)
		return 1;
	for (int i = 0; i < n; i++)
		pthread_create(&t[i], NULL, sleeper, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}
