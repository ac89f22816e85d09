// Command bench measures supervise on the paths it sits on: restart after a
// kill -9, its memory, heartbeat intake, durable turn markers, the hook
// round trip of `supervise notify`, start-up
// with a large journal, what the model-API proxy adds to a model call, and
// a long life (400 000 turns over 10 000 sessions: memory and journal flat). Every row of the table it prints is measured in the
// same run on the same machine, beside a floor (a minimal fork/exec/wait
// loop, the disk's raw fsync rate) and, where installed, the peers runit
// (runsv), s6 (s6-supervise) and supervisor (supervisord). It installs
// nothing: an absent peer is skipped and said so.
//
// Usage, from the module root:
//
//	go run ./bench            # the full run (about 3 minutes, and the long life's few)
//	go run ./bench -quick     # a smoke run (about 40 seconds; the long life 10x smaller)
//	go run ./bench -only life # the long-life row alone
//	go run ./bench -h         # flags
//
// It builds supervise and its helpers (bench/reporter, bench/respawn,
// bench/agent, and with gcc csrc/reporter.c and csrc/respawn.c) into a
// temporary directory, which it removes unless -keep is given.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	quick       bool
	kills       int
	settle      time.Duration
	blast       time.Duration
	markerDur   time.Duration
	fsyncDur    time.Duration
	sessions    int
	runs        int
	starts      int
	hooks       int
	supervise   string
	only        string
	keep        bool
	out         string
	noPeers     bool
	sessionsHi  int
	alt         string
	altName     string
	scaleEnv    string
	smallStarts int
	// The long-life row: turns over sessions from workers goroutines.
	lifeTurns, lifeSessions, lifeWorkers int
}

func main() {
	var c config
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	fs.BoolVar(&c.quick, "quick", false, "smoke run: fewer kills, shorter loads, a 10x smaller large journal")
	fs.IntVar(&c.kills, "kills", 30, "kill -9s per supervisor for restart latency (at least 20 for the full run)")
	fs.DurationVar(&c.settle, "settle", 150*time.Millisecond, "pause after each restart before the next supervisor's kill, so one's after-start work does not overlap another's restart")
	fs.DurationVar(&c.blast, "blast", 3*time.Second, "heartbeat blast duration")
	fs.DurationVar(&c.markerDur, "markers", 3*time.Second, "duration of each marker run")
	fs.DurationVar(&c.fsyncDur, "fsync", 2*time.Second, "duration of the raw fsync and journal commit loops")
	fs.IntVar(&c.sessions, "journal-sessions", 100_000, "settled sessions in the large journal")
	fs.IntVar(&c.runs, "journal-runs", 1_000_000, "runs in the large journal")
	fs.IntVar(&c.starts, "starts", 7, "start-ups timed per journal")
	fs.IntVar(&c.smallStarts, "small-starts", 30, "start-ups timed on the small journal, each binary in turn (interleaved with -alt)")
	fs.IntVar(&c.hooks, "hooks", 200, "rounds of `supervise notify turn-begin` + `turn-end` for the hook round trip")
	fs.IntVar(&c.sessionsHi, "concurrency", 64, "concurrent sessions for the group-commit row")
	fs.IntVar(&c.lifeTurns, "life-turns", 400_000, "turns of the long-life row (issue 46: 400 000)")
	fs.IntVar(&c.lifeSessions, "life-sessions", 10_000, "session ids the long-life row's turns are spread over, round robin (issue 46: 10 000)")
	fs.IntVar(&c.lifeWorkers, "life-workers", 200, "concurrent senders of the long-life row (lowered to a divisor of -life-sessions; each owns its sessions)")
	fs.StringVar(&c.supervise, "supervise", "", "use this supervise binary instead of building ./cmd/supervise")
	fs.StringVar(&c.alt, "alt", "", "also measure this supervise binary, side by side in the same run (for example one built with a proposed patch)")
	fs.StringVar(&c.altName, "alt-name", "supervise-alt", "row label of the -alt binary")
	fs.StringVar(&c.scaleEnv, "scale-env", "", "comma-separated K=V added to the environment of every supervise of the scale rows (for example GOGC=100), to measure a runtime setting")
	fs.StringVar(&c.only, "only", "", "comma-separated sections to run: restart,intake,markers,hooks,node,startup,scale,proxy,life,powerloss (default all)")
	fs.BoolVar(&c.noPeers, "no-peers", false, "skip runsv, s6-supervise and supervisord even if installed")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory (logs, journals) and print its path")
	fs.StringVar(&c.out, "o", "", "also write the report to this file")
	fs.Parse(os.Args[1:])
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.quick {
		for name, apply := range map[string]func(){
			"kills":            func() { c.kills = 5 },
			"blast":            func() { c.blast = time.Second },
			"markers":          func() { c.markerDur = time.Second },
			"fsync":            func() { c.fsyncDur = time.Second },
			"journal-sessions": func() { c.sessions = 10_000 },
			"journal-runs":     func() { c.runs = 100_000 },
			"starts":           func() { c.starts = 3 },
			"hooks":            func() { c.hooks = 40 },
			"small-starts":     func() { c.smallStarts = 5 },
			"life-turns":       func() { c.lifeTurns = 40_000 },
			"life-sessions":    func() { c.lifeSessions = 1_000 },
		} {
			if !set[name] {
				apply()
			}
		}
	}
	os.Exit(run(c, os.Args[1:]))
}

func run(c config, args []string) int {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	work, err := os.MkdirTemp("", "supervise-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if c.keep {
		defer fmt.Fprintln(os.Stderr, "bench: work directory kept:", work)
	} else {
		defer os.RemoveAll(work)
	}
	b := &bench{cfg: c, work: work, ctx: ctx}
	defer b.runCleanup()
	progress("building into %s", work)
	if err := b.build(); err != nil {
		fmt.Fprintln(os.Stderr, "bench: build:", err)
		return 1
	}
	sections := map[string]bool{"restart": true, "intake": true, "markers": true, "hooks": true, "node": true, "startup": true, "proxy": true, "scale": true, "life": true}
	if c.only != "" {
		clear(sections)
		for _, s := range strings.Split(c.only, ",") {
			sections[strings.TrimSpace(s)] = true
		}
	}
	steps := []struct {
		name string
		fn   func() error
	}{
		{"restart", b.restart},
		{"intake", b.intake},
		{"markers", b.markers},
		{"hooks", b.hooks},
		{"node", b.node},
		{"startup", b.startup},
		{"scale", b.scale},
		{"proxy", b.proxy},
		{"life", b.life},
	}
	for _, st := range steps {
		if !sections[st.name] {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		if err := st.fn(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", st.name, err)
			b.note("%s: failed: %v", st.name, err)
		}
	}
	// The journal's crash-image enumerator, in every full run.
	if (c.only == "" || sections["powerloss"]) && ctx.Err() == nil {
		if err := b.powerloss(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: powerloss: %v\n", err)
			b.note("powerloss: failed: %v", err)
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "bench: interrupted")
		return 130
	}
	var w io.Writer = os.Stdout
	if c.out != "" {
		f, err := os.Create(c.out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	b.report(w, "go run ./bench"+strings.TrimRight(" "+strings.Join(args, " "), " "))
	return 0
}

// progress logs what the harness is doing to stderr; the report goes to
// stdout.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}
