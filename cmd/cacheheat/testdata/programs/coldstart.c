// SPDX-License-Identifier: Apache-2.0
// coldstart FILE SECONDS: what a program starting on a cold page cache
// does. It drops FILE's pages from the page cache (posix_fadvise
// DONTNEED: this file only, nothing else on the host), reads 4 KiB blocks
// of it in a shuffled order, as a program loads an index or a database at
// start-up (no read-ahead helps), then sleeps. Its disk I/O is all in its
// first moments: start-up I/O, not an I/O-bound program.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: coldstart FILE SECONDS\n");
		return 2;
	}
	int fd = open(argv[1], O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		perror(argv[1]);
		return 1;
	}
	fdatasync(fd);
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	long blocks = st.st_size / 4096;
	long *order = malloc(blocks * sizeof(*order));
	if (!order)
		return 1;
	for (long i = 0; i < blocks; i++)
		order[i] = i;
	srand(1);
	for (long i = blocks - 1; i > 0; i--) {
		long j = rand() % (i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	static char buf[4096];
	long total = 0;
	for (long i = 0; i < blocks / 4; i++)
		if (pread(fd, buf, sizeof(buf), order[i] * 4096) == sizeof(buf))
			total += sizeof(buf);
	close(fd);
	printf("read %ld bytes\n", total);
	fflush(stdout);
	struct timespec ts = {.tv_sec = atoi(argv[2])};
	nanosleep(&ts, NULL);
	return 0;
}
