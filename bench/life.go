package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/internal/statedir"
)

// lifeResult is bench/agent's JSON result in BENCH_MODE=life.
type lifeResult struct {
	Turns    int    `json:"turns"`
	Sessions int    `json:"sessions"`
	Workers  int    `json:"workers"`
	Phases   bool   `json:"phases"`
	Markers  int64  `json:"markers"`
	Errors   int64  `json:"errors"`
	FirstErr string `json:"first_err"`
	TenthNS  int64  `json:"tenth_ns"`
	RestNS   int64  `json:"rest_ns"`
}

// lifeSample is supervise's memory and journal at one point of the run.
type lifeSample struct {
	mem     memParts  // PSS by mapping, RSS (KiB)
	status  memStatus // VmHWM and the RSS split (KiB)
	journal int64     // journal.db size, bytes
	pages   int64     // bytes of the pages bbolt has used in it (its high-water mark)
	commits uint64
	cpu     time.Duration // supervise's CPU time so far
}

// lifeOutcome is what one long-life run measured.
type lifeOutcome struct {
	res          lifeResult
	tenth, end   lifeSample
	ratio        float64 // end RSS / RSS at 10%
	met          bool
	cpuPerKTurns time.Duration // supervise's CPU per 1 000 turns, after the tenth
}

// The long-life row's bounds (issue 46, item 9).
const (
	lifeRatioMax   = 1.25     // RSS at the end / RSS at 10% of the turns
	lifeJournalMax = 32 << 20 // journal.db at the end, bytes
)

// life measures a long life: -life-turns turns spread over -life-sessions
// session ids through one supervise, RSS at 10% of the turns and at the
// end, and the journal's size at the end.
func (b *bench) life() error {
	for _, sv := range b.svs {
		if b.ctx.Err() != nil {
			return b.ctx.Err()
		}
		what := fmt.Sprintf("long life: %d turns over %d sessions, RSS at the end / at 10%%", b.cfg.lifeTurns, b.cfg.lifeSessions)
		if _, err := b.lifeOne(sv, what); err != nil {
			b.add(row{what, sv.name, "failed", err.Error(), lifeTarget(), "**missed**"})
		}
	}
	return nil
}

func lifeTarget() string {
	return fmt.Sprintf("<= %.2fx, journal.db < %d MiB", lifeRatioMax, lifeJournalMax>>20)
}

// lifeSampleOf reads supervise's memory (smaps, status), its journal's
// size and its commit count.
func (b *bench) lifeSampleOf(sv svBin, a *agentRun) (lifeSample, error) {
	var s lifeSample
	var err error
	if s.mem, err = smaps(a.p.pid(), sv.path); err != nil {
		return s, err
	}
	if s.status, err = readMem(a.p.pid()); err != nil {
		return s, err
	}
	s.cpu, _ = cpuTime(a.p.pid())
	fi, err := os.Stat(statedir.JournalPath(a.state))
	if err != nil {
		return s, err
	}
	s.journal, s.pages = fi.Size(), journalPages(statedir.JournalPath(a.state))
	st, _, err := b.status(a.state)
	if err != nil {
		return s, err
	}
	if st.Journal != nil {
		s.commits = st.Journal.Commits
	}
	return s, nil
}

// lifeOne runs the long life under one supervise binary and adds its row.
func (b *bench) lifeOne(sv svBin, what string) (lifeOutcome, error) {
	var o lifeOutcome
	c := b.cfg
	progress("long life: %s, %d turns over %d sessions from %d workers", sv.name, c.lifeTurns, c.lifeSessions, c.lifeWorkers)
	env := []string{"BENCH_MODE=life", "BENCH_TURNS=" + strconv.Itoa(c.lifeTurns),
		"BENCH_SESSIONS=" + strconv.Itoa(c.lifeSessions), "BENCH_WORKERS=" + strconv.Itoa(c.lifeWorkers)}
	a, err := b.startAgent(sv, "life", nil, env...)
	if err != nil {
		return o, err
	}
	defer a.stop()
	// Generous: 5 ms a turn is a tenth of the slowest rate seen here.
	wait := max(2*time.Minute, time.Duration(c.lifeTurns)*5*time.Millisecond)
	if err := syscall.Kill(a.agent, syscall.SIGUSR1); err != nil {
		return o, err
	}
	if _, err := b.waitLine(a.out, "tenth ", wait); err != nil {
		return o, fmt.Errorf("%v; log: %s", err, tail(a.log, 5))
	}
	if o.tenth, err = b.lifeSampleOf(sv, a); err != nil {
		return o, err
	}
	if err := syscall.Kill(a.agent, syscall.SIGUSR1); err != nil {
		return o, err
	}
	if _, err := b.waitLine(a.out, "done ", wait); err != nil {
		return o, fmt.Errorf("%v; log: %s", err, tail(a.log, 5))
	}
	if o.end, err = b.lifeSampleOf(sv, a); err != nil {
		return o, err
	}
	raw, err := os.ReadFile(a.out + ".json")
	if err != nil {
		return o, err
	}
	if err := json.Unmarshal(raw, &o.res); err != nil {
		return o, err
	}
	r := o.res
	if r.Errors > 0 || r.Turns != c.lifeTurns {
		return o, fmt.Errorf("%d of %d turns completed, %d errors, first: %s", r.Turns, c.lifeTurns, r.Errors, r.FirstErr)
	}
	o.ratio = float64(o.end.mem.rss) / float64(max(o.tenth.mem.rss, 1))
	o.met = o.ratio <= lifeRatioMax && o.end.journal < lifeJournalMax
	rest := r.Turns - r.Turns/10
	o.cpuPerKTurns = time.Duration(float64(o.end.cpu-o.tenth.cpu) / float64(max(rest, 1)) * 1000)
	el := time.Duration(r.TenthNS + r.RestNS)
	phase := "turn-begin, tool phase, turn-end"
	if !r.Phases {
		phase = "turn-begin, turn-end"
	}
	detail := fmt.Sprintf("RSS %s at 10%% → %s at the end (peak %s; anon %s → %s); PSS %s → %s; journal.db %s (pages used %s) at 10%% → %s (%s) at the end; "+
		"%d turns (%s, each confirmed by a barrier) over %d session ids from %d workers in %s (%s turns, %s markers); %d commits; "+
		"supervise CPU per 1 000 turns %s; load %s",
		mib(o.tenth.mem.rss), mib(o.end.mem.rss), mib(o.end.status.hwm), mib(o.tenth.mem.anonRSS), mib(o.end.mem.anonRSS),
		mib(o.tenth.mem.pss), mib(o.end.mem.pss), mibBytes(o.tenth.journal), mibBytes(o.tenth.pages), mibBytes(o.end.journal), mibBytes(o.end.pages),
		r.Turns, phase, r.Sessions, r.Workers, el.Round(time.Second), rate(float64(r.Turns)/el.Seconds()), rate(float64(r.Markers)/el.Seconds()),
		o.end.commits, ms(o.cpuPerKTurns), loadavg())
	b.add(row{what, sv.name, fmt.Sprintf("%s at the end, %.2fx the %s at 10%%; journal.db %s", mib(o.end.mem.rss), o.ratio, mib(o.tenth.mem.rss), mibBytes(o.end.journal)),
		detail, lifeTarget(), metMissed(o.met)})
	return o, nil
}

func mibBytes(n int64) string { return mib(n / 1024) }

// journalPages reads the high-water mark of a bbolt file from its newer
// meta page: the pages in use or free inside the file. The rest of the
// file is what bbolt grew it by in advance: up to 16 MiB (its AllocSize)
// it grows the file to its map size, which doubles (8 MiB, 16 MiB); past
// that to the pages needed plus 16 MiB, so pages beyond 16 MiB make a
// file over 32 MiB.
// It returns the bytes those pages take, or 0 if the file does not read
// as bbolt's.
func journalPages(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	// A meta page: the page header (16 bytes), then magic, version,
	// pageSize, flags (uint32 each), the root bucket (16), the freelist's
	// page id, the high-water page id, the transaction id (uint64 each).
	meta := func(off int64) (pageSize uint32, pgid, txid uint64, ok bool) {
		var m [80]byte
		if _, err := f.ReadAt(m[:], off); err != nil || binary.LittleEndian.Uint32(m[16:]) != 0xED0CDAED {
			return 0, 0, 0, false
		}
		return binary.LittleEndian.Uint32(m[24:]), binary.LittleEndian.Uint64(m[56:]), binary.LittleEndian.Uint64(m[64:]), true
	}
	ps, pgid, txid, ok := meta(0)
	if !ok {
		return 0
	}
	if _, pgid1, txid1, ok := meta(int64(ps)); ok && txid1 > txid {
		pgid = pgid1
	}
	return int64(pgid) * int64(ps)
}
