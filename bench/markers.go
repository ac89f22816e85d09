package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
)

// markerResult is bench/agent's JSON result (agent.Result).
type markerResult struct {
	Sessions int     `json:"sessions"`
	Markers  int     `json:"markers"`
	Errors   int     `json:"errors"`
	FirstErr string  `json:"first_err"`
	NS       int64   `json:"ns"`
	P50      int64   `json:"p50_ns"`
	P99      int64   `json:"p99_ns"`
	Max      int64   `json:"max_ns"`
	Mean     float64 `json:"mean_ns"`
}

// markers measures durable turn markers beside what bounds them: the raw
// fdatasync rate of the state dir's disk, probed right before and right
// after each run (the disk is shared, and its rate drifts), and the
// journal's own commit rate without supervise.
func (b *bench) markers() error {
	probe := b.cfg.fsyncDur / 4
	fs := &fsyncProbe{dir: b.work}
	if err := fs.run(probe); err != nil {
		b.note("raw fsync not measured: %v", err)
		fs = nil
	}
	b.journalCommitRow(fs)
	type run struct {
		sessions int
		marker   bool
	}
	for _, r := range []run{{1, false}, {1, true}, {b.cfg.sessionsHi, true}} {
		for _, sv := range b.svs {
			if err := b.markerRun(sv, r.sessions, r.marker, fs); err != nil {
				what := fmt.Sprintf("%d session(s)", r.sessions)
				b.add(row{"durable turn markers", sv.name + ", " + what, "failed", err.Error(), "", "**missed**"})
			}
		}
	}
	if fs != nil {
		l := fs.lat.sorted()
		r := float64(len(l)) / fs.total.Seconds()
		b.add(row{"raw fsync rate of the state dir's disk (the bound)", "pwrite 4 KiB + fdatasync, same filesystem", rate(r),
			fmt.Sprintf("median %s, p99 %s, n=%d, in %d probes of %s around the rows above; bbolt does 2 fdatasyncs per commit, so at most %s commits",
				ms(l.q(0.5)), ms(l.q(0.99)), len(l), fs.probes, ms(probe), rate(r/2)), "", ""})
	}
	return nil
}

// fsyncProbe measures write(4 KiB)+fdatasync on one file in the directory
// that holds the state dirs, in short probes, accumulating over all of them.
type fsyncProbe struct {
	dir    string
	lat    sample
	total  time.Duration
	probes int
	last   float64 // rate of the last probe
}

func (p *fsyncProbe) run(d time.Duration) error {
	if p == nil {
		return nil
	}
	path := filepath.Join(p.dir, "fsync.test")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	defer f.Close()
	// Preallocated, like a bbolt file that has grown: overwrites only.
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		return err
	}
	if err := datasync(f); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	start := time.Now()
	n := 0
	for ; time.Since(start) < d; n++ {
		buf[0] = byte(n)
		t := time.Now()
		if _, err := f.WriteAt(buf, int64(n%256)*4096); err != nil {
			return err
		}
		if err := datasync(f); err != nil {
			return err
		}
		p.lat = append(p.lat, time.Since(t))
	}
	el := time.Since(start)
	p.total += el
	p.probes++
	p.last = float64(n) / el.Seconds()
	return nil
}

// coldCommits times n commits the way bbolt makes one (three pages and an
// fdatasync, then the meta page and another), each after gap with no I/O
// from this process: a restart's commit comes after a quiet spell, and on
// a virtual disk a sync after idle costs two to three times one of a busy
// loop (2026-12-02 here: 0.46-0.59 ms for the pair after 5-150 ms idle,
// 0.21-0.25 ms back to back), so the loop's median is no floor for it.
func coldCommits(dir string, n int, gap time.Duration) (sample, error) {
	path := filepath.Join(dir, "fsync-cold.test")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	defer os.Remove(path)
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 64<<10), 0); err != nil {
		return nil, err
	}
	if err := datasync(f); err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	var lat sample
	for i := range n {
		time.Sleep(gap)
		buf[0] = byte(i)
		t := time.Now()
		for _, pg := range []int64{2, 3, 7} {
			if _, err := f.WriteAt(buf, pg*4096); err != nil {
				return nil, err
			}
		}
		if err := datasync(f); err != nil {
			return nil, err
		}
		if _, err := f.WriteAt(buf, int64(i%2)*4096); err != nil {
			return nil, err
		}
		if err := datasync(f); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	return lat, nil
}

// around runs fn between two probes and returns the probes' mean rate.
func (p *fsyncProbe) around(d time.Duration, fn func() error) (float64, error) {
	if p == nil {
		return 0, fn()
	}
	p.run(d)
	before := p.last
	err := fn()
	p.run(d)
	return (before + p.last) / 2, err
}

// ceiling describes a rate against the bbolt commit ceiling of the disk.
func ceiling(perSec, fsyncRate float64) string {
	if fsyncRate <= 0 {
		return ""
	}
	return fmt.Sprintf("; disk probed at %s fdatasyncs around this row: %.0f%% of its 2-fdatasync commit ceiling %s",
		rate(fsyncRate), 100*perSec/(fsyncRate/2), rate(fsyncRate/2))
}

// journalCommitRow measures journal.Update of one session record, the
// commit a turn marker costs, without supervise around it.
func (b *bench) journalCommitRow(fs *fsyncProbe) {
	progress("journal commit rate for %s", b.cfg.fsyncDur)
	dir := filepath.Join(b.work, "journal-direct")
	os.MkdirAll(dir, 0o700)
	db, err := journal.Open(filepath.Join(dir, "journal.db"), journal.Options{})
	if err != nil {
		b.note("journal commit not measured: %v", err)
		return
	}
	defer db.Close()
	var lat sample
	var el time.Duration
	now := time.Now()
	fsyncRate, err := fs.around(b.cfg.fsyncDur/4, func() error {
		start := time.Now()
		defer func() { el = time.Since(start) }()
		for i := 0; time.Since(start) < b.cfg.fsyncDur; i++ {
			s := record.Session{ID: "bench-" + strconv.Itoa(i%64), State: record.InTurn, Turn: "t1", Phase: "tool", Tool: "t" + strconv.Itoa(i%10),
				TurnStarted: now, LastHeartbeat: now, Updated: now, Run: 1}
			t := time.Now()
			if err := db.Update(func(tx *journal.Tx) error { return tx.PutSession(s) }); err != nil {
				return err
			}
			lat = append(lat, time.Since(t))
		}
		return nil
	})
	if err != nil {
		b.note("journal commit: %v", err)
		return
	}
	r := float64(len(lat)) / el.Seconds()
	l := lat.sorted()
	detail := fmt.Sprintf("median %s, p99 %s, n=%d", ms(l.q(0.5)), ms(l.q(0.99)), len(l)) + ceiling(r, fsyncRate)
	b.add(row{"journal commit, 1 session record (journal.Update, no supervise)", "journal package", rate(r), detail, "", ""})
}

// markerRun runs bench/agent with n sessions under supervise; each loops
// phase marker + Barrier (only Barrier when marker is false).
func (b *bench) markerRun(sv svBin, n int, marker bool, fs *fsyncProbe) error {
	kind := "markers"
	if !marker {
		kind = "barriers"
	}
	progress("durable %s: %s, %d session(s) for %s", kind, sv.name, n, b.cfg.markerDur)
	env := []string{"BENCH_MODE=markers", "BENCH_SESSIONS=" + strconv.Itoa(n), "BENCH_DURATION=" + b.cfg.markerDur.String()}
	if !marker {
		env = append(env, "BENCH_MARKER=none")
	}
	a, err := b.startAgent(sv, fmt.Sprintf("%s-%d", kind, n), nil, env...)
	if err != nil {
		return err
	}
	defer a.stop()
	st0, _, err := b.status(a.state)
	if err != nil {
		return err
	}
	var cpu, acpu time.Duration
	fsyncRate, err := fs.around(b.cfg.fsyncDur/4, func() error {
		cpu0, _ := cpuTime(a.p.pid())
		acpu0, _ := cpuTime(a.agent)
		if err := syscall.Kill(a.agent, syscall.SIGUSR1); err != nil {
			return err
		}
		if _, err := b.waitLine(a.out, "done ", b.cfg.markerDur+60*time.Second); err != nil {
			return err
		}
		cpu1, _ := cpuTime(a.p.pid())
		acpu1, _ := cpuTime(a.agent)
		cpu, acpu = cpu1-cpu0, acpu1-acpu0
		return nil
	})
	if err != nil {
		return err
	}
	st1, _, err := b.status(a.state)
	if err != nil {
		return err
	}
	mem, _ := readMem(a.p.pid())
	raw, err := os.ReadFile(a.out + ".json")
	if err != nil {
		return err
	}
	var r markerResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if r.Errors > 0 {
		return fmt.Errorf("%d errors, first: %s", r.Errors, r.FirstErr)
	}
	perSec := float64(r.Markers) / (float64(r.NS) / 1e9)
	commits := st1.Journal.Commits - st0.Journal.Commits
	perK := func(d time.Duration) string { return ms(time.Duration(float64(d) / float64(max(r.Markers, 1)) * 1000)) }
	per := fmt.Sprintf("CPU per 1 000: supervise %s, agent %s", perK(cpu), perK(acpu))
	subject := fmt.Sprintf("%s, %d session", sv.name, n)
	if n > 1 {
		subject += "s"
	}
	switch {
	case !marker:
		b.add(row{"barrier round trip, nothing to commit (protocol floor)", subject,
			ms(time.Duration(r.P50)) + " median", fmt.Sprintf("p99 %s, max %s; %s; %d commits; %s", ms(time.Duration(r.P99)), ms(time.Duration(r.Max)), rate(perSec), commits, per), "", ""})
	case n == 1:
		detail := fmt.Sprintf("p99 %s, max %s, n=%d; %d commits (%.2f per marker); %s", ms(time.Duration(r.P99)), ms(time.Duration(r.Max)), r.Markers, commits, float64(commits)/float64(max(r.Markers, 1)), per)
		b.add(row{"durable marker round trip (phase marker + Barrier)", subject,
			ms(time.Duration(r.P50)) + " median", detail, "< 2 ms median (disk with sub-ms fsync)", metMissed(r.P50 < int64(2*time.Millisecond))})
		b.add(row{"durable markers per second", subject, rate(perSec), "one marker per commit" + ceiling(perSec, fsyncRate), "", ""})
	default:
		detail := fmt.Sprintf("%d markers in %s, %d commits (%.1f markers per commit, %s commits); latency median %s, p99 %s; %s",
			r.Markers, ms(time.Duration(r.NS)), commits, float64(r.Markers)/float64(max(commits, 1)), rate(float64(commits)/(float64(r.NS)/1e9)),
			ms(time.Duration(r.P50)), ms(time.Duration(r.P99)), per) + ceiling(float64(commits)/(float64(r.NS)/1e9), fsyncRate)
		b.add(row{"durable markers per second (group commit)", subject, rate(perSec), detail, "≥ 10 000/s (where the disk allows)", metMissed(perSec >= 10000)})
		b.memRow(fmt.Sprintf("%s during %d-session markers", sv.name, n), mem)
	}
	return nil
}
