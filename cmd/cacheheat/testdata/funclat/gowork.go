//go:build ignore

// The Go program of the --func tests: main.work is called exactly N times
// (argv[1]) from several goroutines, and the number of calls that
// returned is printed. Every 7th call recurses deeply, so the goroutine's
// stack grows (is copied to a larger one) inside the call: a uretprobe's
// return address on that stack makes the runtime abort ("unexpected
// return pc"); probes on the RET instructions do not. With "panic" as
// argv[2], every 13th call panics out of work and its caller recovers:
// that call never returns.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
)

var (
	sink     atomic.Int64
	returned atomic.Int64
	panics   bool
)

//go:noinline
func deep(n int) int {
	var pad [64]byte
	pad[n%64] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%64])
}

// work's 8 KiB frame does not fit a new goroutine's stack: its first call
// on each goroutine grows the stack in its own prologue, which restarts
// the function from its first instruction.
//
//go:noinline
func work(i int) int {
	var buf [1024]int
	if panics && i%13 == 5 {
		panic(i)
	}
	if i%7 == 0 {
		return deep(20000)
	}
	x := i
	for j := 0; j < 1000; j++ {
		x = x*31 + j
		buf[j] = x
	}
	return buf[i%1000]
}

// call runs work and recovers its panic.
func call(i int) (r int) {
	defer func() {
		if recover() != nil {
			r = 0
		}
	}()
	r = work(i)
	returned.Add(1)
	return r
}

func main() {
	n := 1000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	panics = len(os.Args) > 2 && os.Args[2] == "panic"
	const workers = 4
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			s := 0
			for i := w; i < n; i += workers {
				s += call(i)
			}
			sink.Add(int64(s))
		}(w)
	}
	wg.Wait()
	fmt.Println(returned.Load())
}
