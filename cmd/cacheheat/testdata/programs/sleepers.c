// SPDX-License-Identifier: Apache-2.0
// sleepers N SECONDS [cond]: N threads that each sleep 20 ms at a time,
// waking to do almost nothing, for SECONDS. Many threads, all sleeping:
// no CPU saturation, whatever their number. With "cond" each thread
// sleeps in pthread_cond_timedwait on a condition variable of its own
// that nobody signals, as an idle pool's workers do: futex waits that
// time out, with no lock held by anyone else.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double secs;
static int cond;

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
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	pthread_mutex_lock(&mu);
	while (now() < end) {
		if (!cond) {
			nanosleep(&ts, NULL);
			continue;
		}
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += ts.tv_nsec;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&cv, &mu, &until);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 64;
	secs = argc > 2 ? atof(argv[2]) : 3;
	cond = argc > 3 && strcmp(argv[3], "cond") == 0;
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
