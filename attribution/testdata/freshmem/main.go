// Command freshmem touches fresh memory in a loop: it maps an anonymous
// region, writes one byte per page and unmaps it, for the given number of
// seconds. Every touch is a minor page fault, so a recording of it must
// show page-fault-storm. Used by cmd/cacheheat's end-to-end test.
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

func main() {
	secs := 3.0
	if len(os.Args) > 1 {
		if v, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			secs = v
		}
	}
	const size = 16 << 20
	page := os.Getpagesize()
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	var touched int
	for time.Now().Before(end) {
		b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			fmt.Fprintln(os.Stderr, "freshmem: mapping:", err)
			os.Exit(1)
		}
		for i := 0; i < size; i += page {
			b[i] = 1
		}
		touched += size / page
		if err := syscall.Munmap(b); err != nil {
			fmt.Fprintln(os.Stderr, "freshmem: unmapping:", err)
			os.Exit(1)
		}
	}
	fmt.Printf("freshmem: touched %d fresh pages in %.1fs\n", touched, secs)
}
