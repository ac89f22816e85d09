package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/internal/trace"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
)

// startup times supervise from its start to its child's exec (the
// reporter's stamp against the harness's clock read just before it starts
// supervise): first on an empty state dir, then with a large journal of
// settled sessions and runs (built with the journal package), clean and
// after a supervise that died (the journal's clean flag cleared, which
// makes supervise verify every page before trusting it).
func (b *bench) startup() error {
	dir := filepath.Join(b.work, "startup")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	stamps, err := b.stampFIFO(filepath.Join(dir, "stamps.fifo"))
	if err != nil {
		return err
	}
	for _, sv := range b.svs {
		empty := filepath.Join(dir, sv.name+"-empty")
		if err := b.startupRow(sv, stamps, empty, "empty state dir (first start creates the journal)", 1, nil); err != nil {
			return err
		}
	}
	if err := b.startupSmall(stamps, dir); err != nil {
		return err
	}

	large := filepath.Join(dir, "large")
	os.MkdirAll(large, 0o700)
	path := filepath.Join(large, "journal.db")
	progress("start-up: building a journal of %d settled sessions and %d runs", b.cfg.sessions, b.cfg.runs)
	t := time.Now()
	if err := buildJournal(path, b.cfg.sessions, b.cfg.runs); err != nil {
		return err
	}
	built := time.Since(t)
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("large journal: %d settled sessions, %d runs, %s file", b.cfg.sessions, b.cfg.runs, mib(fi.Size()/1024))
	b.note("start-up: the large journal took %s to build with journal.Update (batches of 10 000 records); its pages are in the page cache (warm), as after any recent use", built.Round(time.Millisecond))
	for _, sv := range b.svs {
		if err := b.startupRow(sv, stamps, large, what+", clean", b.cfg.starts, nil); err != nil {
			if err := b.largeFailed(sv, err); err != nil {
				return err
			}
		}
	}
	dirty := func() error {
		db, err := journal.Open(path, journal.Options{})
		if err != nil {
			return err
		}
		defer db.Close()
		return db.Update(func(tx *journal.Tx) error { return tx.SetClean(false) })
	}
	n := min(b.cfg.starts, 3)
	for _, sv := range b.svs {
		if err := b.startupRow(sv, stamps, large, what+", after supervise died (clean flag cleared: Verify runs)", n, dirty); err != nil {
			if err := b.largeFailed(sv, err); err != nil {
				return err
			}
		}
	}

	// The same sessions with the default run retention (--keep-runs 1000):
	// what a long-lived journal holds, and what Verify then walks.
	kept := filepath.Join(dir, "kept")
	os.MkdirAll(kept, 0o700)
	keptPath := filepath.Join(kept, "journal.db")
	if err := buildJournal(keptPath, b.cfg.sessions, 1000); err != nil {
		return err
	}
	if fi, err = os.Stat(keptPath); err != nil {
		return err
	}
	what = fmt.Sprintf("large journal: %d settled sessions, 1000 runs (default --keep-runs), %s file", b.cfg.sessions, mib(fi.Size()/1024))
	path = keptPath
	for _, sv := range b.svs {
		if err := b.startupRow(sv, stamps, kept, what+", after supervise died (Verify runs)", n, dirty); err != nil {
			if err := b.largeFailed(sv, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// largeFailed notes a large-journal row that an -alt binary could not
// run and lets the others go on: the journals are built by this tree's
// journal package, whose schema an older build may refuse ("journal schema
// is newer than this supervise"). A failure of the binary under test ends
// the section.
func (b *bench) largeFailed(sv svBin, err error) error {
	if sv == b.svs[0] {
		return err
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, "supervise: "); i >= 0 {
		msg = msg[i:] // its own words, after the log lines before them
	}
	b.note("start-up: %s cannot start on the large journals (built by this tree's journal package): %s", sv.name, firstLines(msg, 1))
	return nil
}

// startupRow starts supervise n times on state (each stopped cleanly with
// SIGTERM), calling before first each time, and adds a row.
func (b *bench) startupRow(sv svBin, stamps <-chan stamp, state, what string, n int, before func() error) error {
	progress("start-up: %s, %s, %d starts", sv.name, what, n)
	var lat sample
	var mem memStatus
	for i := range n {
		d, m, err := b.startOnce(sv, stamps, state, i, before)
		if err != nil {
			return err
		}
		lat = append(lat, d)
		if m.hwm > mem.hwm {
			mem = m
		}
	}
	b.startupAdd(sv, what, lat, mem, "")
	return nil
}

// startupSmall is the small-journal row: every binary (supervise and
// -alt) started in turn, the order alternating per round, so a slow spell
// of the shared machine falls on both alike; n = -small-starts (30).
func (b *bench) startupSmall(stamps <-chan stamp, dir string) error {
	n := b.cfg.smallStarts
	progress("start-up: small journal, %d starts each, interleaved", n)
	lats := make([]sample, len(b.svs))
	mems := make([]memStatus, len(b.svs))
	steps := make([][]map[trace.Step]time.Duration, len(b.svs))
	for i := range n {
		for k := range b.svs {
			j := k
			if i%2 == 1 {
				j = len(b.svs) - 1 - k
			}
			sv := b.svs[j]
			d, m, st, err := b.startTraced(sv, stamps, filepath.Join(dir, sv.name+"-empty"), i, nil)
			if err != nil {
				return err
			}
			lats[j] = append(lats[j], d)
			if len(st) > 0 {
				steps[j] = append(steps[j], st)
			}
			if m.hwm > mems[j].hwm {
				mems[j] = m
			}
		}
	}
	extra := ""
	if len(b.svs) > 1 {
		// The paired ratio: each round's start of supervise over the -alt
		// start next to it, so the machine's drift cancels.
		var ratios []float64
		for i := range lats[0] {
			ratios = append(ratios, float64(lats[0][i])/float64(max(lats[1][i], 1)))
		}
		slices.Sort(ratios)
		extra = fmt.Sprintf("; interleaved with %s: ratio of medians %.2f, paired ratio median %.2f (p25 %.2f, p75 %.2f)", b.svs[1].name,
			float64(lats[0].sorted().q(0.5))/float64(max(lats[1].sorted().q(0.5), 1)),
			ratios[len(ratios)/2], ratios[len(ratios)/4], ratios[3*len(ratios)/4])
	}
	for j, sv := range b.svs {
		e := ""
		if j == 0 {
			e = extra
		}
		b.startupAdd(sv, "small journal (a few runs)", lats[j], mems[j], e)
	}
	for j, sv := range b.svs {
		b.startupBreakdown(sv, steps[j])
	}
	return nil
}

// traceExec stands for the child's exec stamp among a start's steps.
const traceExec = trace.Step(255)

// startupBreakdown adds the small-journal start-up step by step, from
// the trace points of each start: the median of each step over the starts
// that have both of its ends.
func (b *bench) startupBreakdown(sv svBin, starts []map[trace.Step]time.Duration) {
	if len(starts) == 0 {
		return
	}
	const begin = trace.Step(254) // the harness's clock just before the start
	for _, st := range []struct {
		name     string
		from, to trace.Step
	}{
		{"start → run command entered (exec, runtime and package init)", begin, trace.MainStart},
		{"run command → journal open (flags, state dir, journal open)", trace.MainStart, trace.JournalOpened},
		{"journal open → Run entered (reaper, New, sockets)", trace.JournalOpened, trace.RunStart},
		{"start → Run entered (exec, package init, flags, journal open, New)", begin, trace.RunStart},
		{"Run entered → boot done (journal taken over, boot committed)", trace.RunStart, trace.BootDone},
		{"boot done → cgroup ready (first launch prepared)", trace.BootDone, trace.CgroupReady},
		{"cgroup ready → fork start", trace.CgroupReady, trace.ForkStart},
		{"fork start → child exec'd", trace.ForkStart, traceExec},
		{"start → child exec'd (whole)", begin, traceExec},
	} {
		var d sample
		for _, m := range starts {
			a, ok1 := m[st.from]
			if st.from == begin {
				a, ok1 = 0, true
			}
			z, ok2 := m[st.to]
			if ok1 && ok2 && z >= a {
				d = append(d, z-a)
			}
		}
		if len(d) == 0 {
			continue
		}
		l := d.sorted()
		b.add(row{"start-up breakdown, small journal: " + st.name, sv.name, ms(l.q(0.5)) + " median",
			fmt.Sprintf("p25 %s, p75 %s, n=%d", ms(l.q(0.25)), ms(l.q(0.75)), len(l)), "", ""})
	}
}

// startOnce starts sv on state once and returns the time to its child's
// exec and supervise's memory.
func (b *bench) startOnce(sv svBin, stamps <-chan stamp, state string, i int, before func() error) (time.Duration, memStatus, error) {
	d, mem, _, err := b.startTraced(sv, stamps, state, i, before)
	return d, mem, err
}

// startTraced is startOnce that also returns the start's steps from
// supervise's trace points (internal/trace), as times since the start:
// empty for a binary without them.
func (b *bench) startTraced(sv svBin, stamps <-chan stamp, state string, i int, before func() error) (time.Duration, memStatus, map[trace.Step]time.Duration, error) {
	var mem memStatus
	if before != nil {
		if err := before(); err != nil {
			return 0, mem, nil, err
		}
	}
	logPath := state + ".log"
	tracePath := state + ".trace"
	os.Remove(tracePath)
	t0 := monoNow()
	p, err := b.start([]string{sv.path, "run", "--state-dir", state, "--keep-runs", "2000000", "--", b.reporter},
		baseEnv("REPORTER_OUT="+filepath.Join(filepath.Dir(state), "stamps.fifo"), trace.EnvVar+"="+tracePath), filepath.Dir(state), logPath)
	if err != nil {
		return 0, mem, nil, err
	}
	var st stamp
	select {
	case st = <-stamps:
	case <-time.After(120 * time.Second):
		p.stop(syscall.SIGKILL, 0)
		return 0, mem, nil, fmt.Errorf("start %d: no child within 120s; log: %s", i+1, tail(logPath, 5))
	case <-p.done:
		return 0, mem, nil, fmt.Errorf("start %d: supervise exited: %v; log: %s", i+1, p.err, tail(logPath, 5))
	case <-b.ctx.Done():
		p.stop(syscall.SIGKILL, 0)
		return 0, mem, nil, b.ctx.Err()
	}
	d := time.Duration(st.ns - t0)
	if m, err := readMem(p.pid()); err == nil {
		mem = m
	}
	if !p.stop(syscall.SIGTERM, 15*time.Second) {
		return 0, mem, nil, fmt.Errorf("start %d: supervise did not stop on SIGTERM; log: %s", i+1, tail(logPath, 5))
	}
	if alive(st.pid) && exeIs(st.pid, b.reporter) {
		syscall.Kill(st.pid, syscall.SIGKILL)
	}
	marks, _ := readTrace(tracePath)
	steps := map[trace.Step]time.Duration{}
	for _, m := range marks {
		if _, dup := steps[m.step]; !dup && m.ns >= t0 {
			steps[m.step] = time.Duration(m.ns - t0)
		}
	}
	if len(steps) > 0 {
		steps[traceExec] = d
	}
	return d, mem, steps, nil
}

// startupAdd adds one start-up row.
func (b *bench) startupAdd(sv svBin, what string, lat sample, mem memStatus, extra string) {
	l := lat.sorted()
	detail := fmt.Sprintf("min %s, p25 %s, p75 %s, max %s, n=%d; supervise VmHWM %s (anon %s, file %s); load %s%s",
		ms(l[0]), ms(l.q(0.25)), ms(l.q(0.75)), ms(l[len(l)-1]), len(l), mib(mem.hwm), mib(mem.anon), mib(mem.file), loadavg(), extra)
	target, verdict := "", ""
	if strings.HasPrefix(what, "large") {
		target = "< 200 ms"
		verdict = metMissed(l.q(0.5) < 200*time.Millisecond)
	}
	b.add(row{"start-up: supervise start → child exec'd", sv.name + ", " + what, ms(l.q(0.5)) + " median", detail, target, verdict})
}

// buildJournal writes sessions settled sessions (idle and closed,
// alternately) and runs finished runs, in transactions of 10 000 records.
func buildJournal(path string, sessions, runs int) error {
	db, err := journal.Open(path, journal.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	const batch = 10_000
	base := time.Now().Add(-time.Duration(runs) * time.Minute).UTC()
	for i := 0; i < sessions; i += batch {
		err := db.Update(func(tx *journal.Tx) error {
			for j := i; j < min(i+batch, sessions); j++ {
				state, outcome := record.Idle, "completed"
				if j%2 == 1 {
					state = record.Closed
				}
				at := base.Add(time.Duration(j) * time.Second)
				s := record.Session{ID: fmt.Sprintf("0196b4a4-6f0e-7cc0-%04x-%012x", j>>16&0xffff, j), State: state, Turn: "turn-" + strconv.Itoa(j),
					Outcome: outcome, Prompt: "settled request " + strconv.Itoa(j), TurnStarted: at, LastHeartbeat: at, Updated: at, Run: uint64(j%max(runs, 1) + 1)}
				if err := tx.PutSession(s); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for i := 0; i < runs; i += batch {
		err := db.Update(func(tx *journal.Tx) error {
			for j := i; j < min(i+batch, runs); j++ {
				n, err := tx.NextRun()
				if err != nil {
					return err
				}
				at := base.Add(time.Duration(j) * time.Minute)
				r := record.Run{Run: n, PID: 1000 + j%30000, StartTime: at.UnixMilli(), Started: at, Ended: at.Add(50 * time.Second),
					ExitCode: 137, Signal: 9, Reason: record.ReasonSignal, Dirty: true, LastHeartbeat: at.Add(49 * time.Second),
					Argv: []string{"/usr/local/bin/agent", "--serve"}}
				if err := tx.PutRun(r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
