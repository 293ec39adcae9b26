// SPDX-License-Identifier: Apache-2.0
// work N: a fixed amount of CPU work, N steps of a generator in one hot
// function, then exit. Two builds that differ in N are a program and the
// same program made slower by N2/N: what a CI gate must tell apart.
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) unsigned long generate(long n)
{
	volatile unsigned long x = 1;
	for (long i = 0; i < n; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000000;
	printf("%lu\n", generate(n));
	return 0;
}
