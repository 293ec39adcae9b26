//go:build ignore

// The Go program of the --func tests: main.work is called exactly N times
// (argv[1]) from several goroutines and N is printed. Every 7th call
// recurses deeply, so the goroutine's stack grows (is copied) inside the
// call: a uretprobe's return address on that stack would crash the
// program; probes on the RET instructions do not.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

var sink int

//go:noinline
func deep(n int) int {
	var pad [64]byte
	pad[n%64] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%64])
}

//go:noinline
func work(i int) int {
	if i%7 == 0 {
		return deep(20000)
	}
	x := i
	for j := 0; j < 1000; j++ {
		x = x*31 + j
	}
	return x
}

func main() {
	n := 1000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	const workers = 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s := 0
			for i := w; i < n; i += workers {
				s += work(i)
			}
			mu.Lock()
			sink += s
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	fmt.Println(n)
}
