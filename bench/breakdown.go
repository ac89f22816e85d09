package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/supervise-dev/supervise/internal/trace"
)

// kill is one kill -9 of the restart series: the harness's clock just
// before the kill and the next child's exec stamp.
type kill struct{ t0, exec int64 }

// mark is one line of a supervise trace file (internal/trace).
type mark struct {
	step trace.Step
	ns   int64
}

// readTrace reads a trace file; a missing file is no marks.
func readTrace(path string) ([]mark, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ms []mark
	for sc := bufio.NewScanner(f); sc.Scan(); {
		name, v, ok := strings.Cut(sc.Text(), " ")
		step, known := trace.Parse(name)
		ns, err := strconv.ParseInt(v, 10, 64)
		if ok && known && err == nil {
			ms = append(ms, mark{step, ns})
		}
	}
	return ms, nil
}

// breakdownStep is one row of the restart breakdown: the time from the
// previous point to this one.
type breakdownStep struct {
	name, floor string
	from, to    func(k kill, at map[trace.Step]int64) (int64, bool)
}

// restartBreakdown adds the rows of supervise's restart, step by step,
// from its trace points: each kill's marks are those between its kill and
// the next kill. A kill missing a mark is left out of the steps that need
// it; a binary without trace points gets a note.
func (b *bench) restartBreakdown(s *subject, fs *fsyncProbe, cold sample) {
	marks, err := readTrace(filepath.Join(s.dir, "trace"))
	if err != nil {
		b.note("restart breakdown: %s: %v", s.name, err)
		return
	}
	if len(marks) == 0 {
		b.note("restart breakdown: %s has no trace points (internal/trace: $%s set, no marks written)", s.name, trace.EnvVar)
		return
	}
	per := make([]map[trace.Step]int64, len(s.kills))
	for i := range per {
		per[i] = map[trace.Step]int64{}
	}
	for _, m := range marks {
		for i, k := range s.kills {
			next := int64(1<<63 - 1)
			if i+1 < len(s.kills) {
				next = s.kills[i+1].t0
			}
			if m.ns >= k.t0 && m.ns < next {
				if _, dup := per[i][m.step]; !dup {
					per[i][m.step] = m.ns
				}
				break
			}
		}
	}
	at := func(st trace.Step) func(kill, map[trace.Step]int64) (int64, bool) {
		return func(_ kill, m map[trace.Step]int64) (int64, bool) { v, ok := m[st]; return v, ok }
	}
	killAt := func(k kill, _ map[trace.Step]int64) (int64, bool) { return k.t0, true }
	execAt := func(k kill, _ map[trace.Step]int64) (int64, bool) { return k.exec, k.exec > 0 }
	fsyncFloor := "2 fdatasyncs (bbolt's commit)"
	if fs != nil && len(fs.lat) > 0 {
		fsyncFloor = fmt.Sprintf("2 fdatasyncs: 2 x %s (raw pwrite+fdatasync median, probed beside this row)", ms(fs.lat.sorted().q(0.5)))
	}
	if len(cold) > 0 {
		fsyncFloor += fmt.Sprintf("; %s for the two after idle, as a restart's are (the cold commit probe)", ms(cold.sorted().q(0.5)))
	}
	steps := []breakdownStep{
		{"kill → reaped (the reaper's wait4 returned, child/)", "the kernel's SIGKILL, exit and the waiter's wake-up: a part of the C floor's whole restart", killAt, at(trace.Reaped)},
		{"reaped → death seen (descendants swept, Done closed, the loop woke)", "a scan of supervise's children and one goroutine hand-off: tens of µs", at(trace.Reaped), at(trace.DeathSeen)},
		{"death seen → decided (machine Step returned)", "CPU only, no system call: tens of µs", at(trace.DeathSeen), at(trace.Decided)},
		{"decided → committed (death's commit returned)", fsyncFloor, at(trace.Decided), at(trace.Committed)},
		{"committed → cgroup ready (next run's cgroup made, fd open)", "a cgroupfs mkdir and open: tens of µs", at(trace.Committed), at(trace.CgroupReady)},
		{"cgroup ready → fork start", "nothing: hand-offs only", at(trace.CgroupReady), at(trace.ForkStart)},
		{"fork start → fork call (the spawn thread took the start, child/)", "a goroutine hand-off to a locked thread: tens of µs", at(trace.ForkStart), at(trace.ForkCall)},
		{"fork call → child exec'd (reporter's stamp)", "Go's ForkExec (vfork, the child's signal resets, exec) of a static binary", at(trace.ForkCall), execAt},
		{"fork start → child exec'd (reporter's stamp)", "clone and exec of a static binary: the C floor's fork/exec part", at(trace.ForkStart), execAt},
		{"fork start → start returned in supervise (StartProcess)", "Go's StartProcess returns once the exec succeeded (its CLOEXEC pipe), about when the child runs: the C floor's fork/exec part", at(trace.ForkStart), at(trace.Started)},
		{"kill → child exec'd (the whole restart)", "the C floor row", killAt, execAt},
	}
	for _, st := range steps {
		var d sample
		for i, k := range s.kills {
			a, ok1 := st.from(k, per[i])
			z, ok2 := st.to(k, per[i])
			if ok1 && ok2 && z >= a {
				d = append(d, time.Duration(z-a))
			}
		}
		if len(d) == 0 {
			b.add(row{"restart breakdown: " + st.name, s.name, "no marks", "", st.floor, ""})
			continue
		}
		l := d.sorted()
		b.add(row{"restart breakdown: " + st.name, s.name, ms(l.q(0.5)) + " median",
			fmt.Sprintf("p10 %s, p90 %s, n=%d", ms(l.q(0.1)), ms(l.q(0.9)), len(l)), "floor: " + st.floor, ""})
	}
}
