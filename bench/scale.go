package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// scaleCase is one memory-at-scale configuration: agents supervise
// processes, each running bench/agent with sessions open sessions.
type scaleCase struct{ agents, sessions int }

// memParts is one supervise's proportional set size, split by mapping:
// the supervise binary (text, rodata, data: shared by every supervise of
// the same binary, so its share falls as 1/N), the journal's mmap (bbolt's
// file, private to each), anonymous memory (Go heap, goroutine stacks,
// runtime metadata) and the rest (vdso, stacks of threads).
type memParts struct {
	pss, binary, journal, anon, other int64 // KiB
	rss, anonRSS                      int64 // KiB, from smaps_rollup
}

// scale measures memory with many agents, each under its own supervise:
// PSS per supervise from /proc/PID/smaps (smaps_rollup for the totals), and
// how it grows with the sessions each agent has open.
func (b *bench) scale() error {
	cases := []scaleCase{{20, 1}, {20, 100}, {20, 1000}, {100, 1}, {100, 100}}
	if b.cfg.quick {
		cases = []scaleCase{{20, 1}, {20, 100}}
	}
	for _, sv := range b.svs {
		for _, c := range cases {
			if b.ctx.Err() != nil {
				return b.ctx.Err()
			}
			if err := b.scaleOne(sv, c); err != nil {
				b.add(row{fmt.Sprintf("PSS per supervise, %d agents x %d sessions", c.agents, c.sessions), sv.name, "failed", err.Error(), "<= 2.5 MiB (20 agents)", "**missed**"})
			}
		}
	}
	return nil
}

func (b *bench) scaleOne(sv svBin, c scaleCase) error {
	progress("memory at scale: %s, %d agents with %d sessions each", sv.name, c.agents, c.sessions)
	runs := make([]*agentRun, 0, c.agents)
	defer func() {
		for _, a := range runs {
			a.stop()
		}
	}()
	env := []string{"BENCH_MODE=sessions", "BENCH_SESSIONS=" + strconv.Itoa(c.sessions)}
	if b.cfg.scaleEnv != "" {
		env = append(env, strings.Split(b.cfg.scaleEnv, ",")...)
	}
	for i := range c.agents {
		a, err := b.startAgentWait(sv, fmt.Sprintf("scale-%d-%d-%d", c.agents, c.sessions, i), nil, 0, env...)
		if err != nil {
			return err
		}
		runs = append(runs, a)
	}
	for _, a := range runs {
		if _, err := b.waitLine(a.out, "ready ", 120*time.Second); err != nil {
			return fmt.Errorf("%v; log: %s", err, tail(a.log, 5))
		}
	}
	// Let every supervise finish its after-start work (its first commits,
	// the scavenger's first pass) before reading its memory.
	select {
	case <-time.After(2 * time.Second):
	case <-b.ctx.Done():
		return b.ctx.Err()
	}
	var parts []memParts
	for _, a := range runs {
		m, err := smaps(a.p.pid(), sv.path)
		if err != nil {
			return err
		}
		parts = append(parts, m)
	}
	med := func(f func(memParts) int64) int64 {
		v := make([]int64, len(parts))
		for i, p := range parts {
			v[i] = f(p)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	pss := med(func(m memParts) int64 { return m.pss })
	subject := sv.name
	if b.cfg.scaleEnv != "" {
		subject += " with " + b.cfg.scaleEnv
	}
	detail := fmt.Sprintf("median of %d: binary %s (shared, 1/N each), journal mmap %s, anon %s (Go heap, stacks, runtime), other %s; RSS %s (anon %s); max PSS %s; load %s",
		len(parts), mib(med(func(m memParts) int64 { return m.binary })), mib(med(func(m memParts) int64 { return m.journal })),
		mib(med(func(m memParts) int64 { return m.anon })), mib(med(func(m memParts) int64 { return m.other })),
		mib(med(func(m memParts) int64 { return m.rss })), mib(med(func(m memParts) int64 { return m.anonRSS })),
		mib(slices.MaxFunc(parts, func(x, y memParts) int { return int(x.pss - y.pss) }).pss), loadavg())
	target, verdict := "", ""
	if c.agents == 20 {
		target, verdict = "<= 2.5 MiB", metMissed(pss <= 2560)
	}
	b.add(row{fmt.Sprintf("PSS per supervise, %d agents x %d sessions", c.agents, c.sessions), subject, mib(pss) + " median", detail, target, verdict})
	return nil
}

// smaps reads /proc/pid/smaps and splits its Pss by mapping; bin is the
// supervise binary's path.
func smaps(pid int, bin string) (memParts, error) {
	var m memParts
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return m, err
	}
	defer f.Close()
	binReal, _ := filepath.EvalSymlinks(bin)
	kind := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") { // a mapping's header: range perms offset dev inode [path]
			path := ""
			if len(fields) >= 6 {
				path = fields[5]
			}
			switch {
			case path == bin || path == binReal:
				kind = "binary"
			case strings.HasSuffix(path, ".db"):
				kind = "journal"
			case path == "" || strings.HasPrefix(path, "[anon") || path == "[heap]":
				kind = "anon"
			default:
				kind = "other"
			}
			continue
		}
		if fields[0] != "Pss:" || len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		m.pss += kb
		switch kind {
		case "binary":
			m.binary += kb
		case "journal":
			m.journal += kb
		case "anon":
			m.anon += kb
		default:
			m.other += kb
		}
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	roll, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(string(roll), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "Rss:":
			m.rss = kb
		case "Anonymous:":
			m.anonRSS = kb
		}
	}
	return m, nil
}

// loadavg is the one-minute load average, for the rows measured on a
// shared machine.
func loadavg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(raw))[0]
}
