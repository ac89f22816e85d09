// Command agent is the supervised agent of the intake and marker
// benchmarks. It runs under supervise (only the child's tree may talk to
// the notify socket) and reports to $BENCH_OUT.
//
//	BENCH_MODE=blast    ping every 100ms; on SIGUSR1 send WATCHDOG=1 datagrams
//	                    as fast as the socket takes them for $BENCH_DURATION
//	                    from $BENCH_SENDERS connected sockets ($BENCH_PAYLOAD
//	                    plain, or session: with X_SUPERVISE_SESSION), write
//	                    "done sent=N failed=M ns=T", then ping again
//	BENCH_MODE=markers  $BENCH_SESSIONS goroutines, one session each: a
//	                    turn-begin and barrier; then, on SIGUSR1, for
//	                    $BENCH_DURATION a loop of phase marker + Barrier
//	                    (BENCH_MARKER=none: Barrier alone); writes a JSON
//	                    result to $BENCH_OUT.json and "done markers=N"
//	BENCH_MODE=hooks    on SIGUSR1 run $BENCH_HOOKS rounds of `supervise notify
//	                    turn-begin` and `turn-end` ($BENCH_HOOK_BIN), each
//	                    beside an exec of $BENCH_FLOOR_BIN; JSON to
//	                    $BENCH_OUT.json and "done hooks=N"
//	BENCH_MODE=sessions open $BENCH_SESSIONS sessions (a turn-begin each,
//	                    then one barrier), write "ready <pid>" and idle: the
//	                    memory-at-scale row's agent
//	BENCH_MODE=life     on SIGUSR1 run $BENCH_TURNS turns over $BENCH_SESSIONS
//	                    session ids from $BENCH_WORKERS goroutines (turn-begin,
//	                    a tool phase unless BENCH_PHASE=none, turn-end, each
//	                    confirmed by a barrier); after a tenth write "tenth
//	                    turns=N" and wait for SIGUSR1 again; JSON to
//	                    $BENCH_OUT.json and "done turns=N": the long-life row
//
// All write "ready <pid>" when set up and keep running until killed.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/supervise-dev/supervise/marker"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/notify"
)

var client = &notify.Client{Timeout: 2 * time.Second}

func main() {
	out := os.Getenv("BENCH_OUT")
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		os.Exit(1)
	}
	report := func(format string, args ...any) { fmt.Fprintf(f, format+"\n", args...) }
	d, _ := time.ParseDuration(os.Getenv("BENCH_DURATION"))
	if d <= 0 {
		d = 3 * time.Second
	}
	switch os.Getenv("BENCH_MODE") {
	case "blast":
		blast(report, d)
	case "markers":
		n, _ := strconv.Atoi(os.Getenv("BENCH_SESSIONS"))
		markers(out, report, max(n, 1), d, os.Getenv("BENCH_MARKER") != "none")
	case "hooks":
		n, _ := strconv.Atoi(os.Getenv("BENCH_HOOKS"))
		hooks(out, report, max(n, 1))
	case "sessions":
		n, _ := strconv.Atoi(os.Getenv("BENCH_SESSIONS"))
		sessions(report, max(n, 1))
	case "life":
		turns, _ := strconv.Atoi(os.Getenv("BENCH_TURNS"))
		n, _ := strconv.Atoi(os.Getenv("BENCH_SESSIONS"))
		workers, _ := strconv.Atoi(os.Getenv("BENCH_WORKERS"))
		life(out, report, max(turns, 1), max(n, 1), max(workers, 1), os.Getenv("BENCH_PHASE") != "none")
	default:
		report("error unknown BENCH_MODE %q", os.Getenv("BENCH_MODE"))
	}
	for {
		time.Sleep(time.Hour)
	}
}

// pinger sends WATCHDOG=1 every 100ms until stop is closed.
func pinger(stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			client.Watchdog(context.Background())
			select {
			case <-t.C:
			case <-stop:
				return
			}
		}
	})
	return &wg
}

func blast(report func(string, ...any), d time.Duration) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	stop := make(chan struct{})
	wg := pinger(stop)
	report("ready %d", os.Getpid())
	<-usr1
	close(stop)
	wg.Wait()

	msg := []byte("WATCHDOG=1")
	if os.Getenv("BENCH_PAYLOAD") == "session" {
		msg = []byte("WATCHDOG=1\nX_SUPERVISE_SESSION=0196b4a4-6f0e-7cc0-a2c5-3f6d2c8e9b10")
	}
	senders, _ := strconv.Atoi(os.Getenv("BENCH_SENDERS"))
	senders = max(senders, 1)
	var sent, failed atomic.Int64
	var done atomic.Bool
	start := time.Now()
	var all sync.WaitGroup
	for range senders {
		c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: os.Getenv("NOTIFY_SOCKET"), Net: "unixgram"})
		if err != nil {
			report("error dial %v", err)
			return
		}
		all.Go(func() {
			defer c.Close()
			var n, bad int64
			for i := 0; !done.Load(); i++ {
				if i%256 == 0 {
					c.SetWriteDeadline(time.Now().Add(time.Second))
				}
				if _, err := c.Write(msg); err != nil {
					bad++
					continue
				}
				n++
			}
			sent.Add(n)
			failed.Add(bad)
		})
	}
	time.Sleep(d)
	done.Store(true)
	all.Wait()
	ns := time.Since(start).Nanoseconds()
	pinger(make(chan struct{}))
	report("done sent=%d failed=%d ns=%d", sent.Load(), failed.Load(), ns)
}

// Result is what markers writes, as JSON, to BENCH_OUT.json.
type Result struct {
	Sessions int     `json:"sessions"`
	Markers  int     `json:"markers"`
	Errors   int     `json:"errors"`
	FirstErr string  `json:"first_err,omitempty"`
	NS       int64   `json:"ns"`
	P50      int64   `json:"p50_ns"`
	P99      int64   `json:"p99_ns"`
	Max      int64   `json:"max_ns"`
	Mean     float64 `json:"mean_ns"`
}

func markers(out string, report func(string, ...any), n int, d time.Duration, withPhases bool) {
	ctx := context.Background()
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	var (
		mu       sync.Mutex
		lat      []int64
		errs     int
		firstErr string
		ready    sync.WaitGroup
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if errs++; firstErr == "" {
			firstErr = err.Error()
		}
		mu.Unlock()
	}
	startc := make(chan struct{})
	var deadline time.Time
	for i := range n {
		ready.Add(1)
		wg.Go(func() {
			id := fmt.Sprintf("bench-%02d", i)
			if err := client.TurnBegin(ctx, id, "t1", "benchmark turn"); err != nil {
				fail(err)
			}
			if err := client.Barrier(ctx, 10*time.Second); err != nil {
				fail(err)
			}
			ready.Done()
			<-startc
			mine := make([]int64, 0, 4096)
			for j := 0; time.Now().Before(deadline); j++ {
				t := time.Now()
				if withPhases {
					if err := client.Phase(ctx, id, marker.PhaseTool, "t"+strconv.Itoa(j%10)); err != nil {
						fail(err)
						continue
					}
				}
				if err := client.Barrier(ctx, 10*time.Second); err != nil {
					fail(err)
					continue
				}
				mine = append(mine, time.Since(t).Nanoseconds())
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	ready.Wait()
	report("ready %d", os.Getpid())
	<-usr1
	start := time.Now()
	deadline = start.Add(d)
	close(startc)
	wg.Wait()
	ns := time.Since(start).Nanoseconds()
	slices.Sort(lat)
	r := Result{Sessions: n, Markers: len(lat), Errors: errs, FirstErr: firstErr, NS: ns}
	if len(lat) > 0 {
		var sum int64
		for _, v := range lat {
			sum += v
		}
		r.P50, r.P99, r.Max = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], lat[len(lat)-1]
		r.Mean = float64(sum) / float64(len(lat))
	}
	b, _ := json.Marshal(r)
	tmp := out + ".json.tmp"
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		os.Rename(tmp, out+".json")
	}
	report("done markers=%d", len(lat))
}

// sessions opens n sessions, each with a turn-begin, confirms them all
// with one barrier (supervise commits them in groups), and reports ready.
func sessions(report func(string, ...any), n int) {
	ctx := context.Background()
	for i := range n {
		if err := client.TurnBegin(ctx, fmt.Sprintf("scale-%d", i), "t1", ""); err != nil {
			report("error turn-begin %d: %v", i, err)
			return
		}
	}
	if err := client.Barrier(ctx, 30*time.Second); err != nil {
		report("error barrier: %v", err)
		return
	}
	report("ready %d", os.Getpid())
}
