// The C program of the --func tests: calls work() exactly N times (argv[1])
// and prints N. One call in 50 touches 4 MiB of fresh memory, page by page
// (huge pages off, so each page is a fault); the others only compute.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BIG (4 << 20)

static volatile unsigned long sink;

__attribute__((noinline)) void work(int i)
{
	if (i % 50 == 49) {
		char *p = mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		madvise(p, BIG, MADV_NOHUGEPAGE);
		for (long off = 0; off < BIG; off += 4096)
			p[off] = 1;
		munmap(p, BIG);
		return;
	}
	unsigned long x = i;
	for (int j = 0; j < 20000; j++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	sink = x;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	for (int i = 0; i < n; i++)
		work(i);
	printf("%d\n", n);
	return 0;
}
