package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// status is the part of `supervise status --json` the harness reads.
type status struct {
	Child struct {
		PID      int    `json:"pid"`
		Run      uint64 `json:"run"`
		Restarts uint64 `json:"restarts"`
		State    string `json:"state"`
	} `json:"child"`
	Runs []struct {
		Run    uint64 `json:"run"`
		Reason string `json:"reason"`
	} `json:"runs"`
	Notify *struct {
		Accepted uint64            `json:"accepted"`
		Pings    uint64            `json:"pings"`
		Dropped  map[string]uint64 `json:"dropped"`
	} `json:"notify"`
	Journal *struct {
		Commits uint64 `json:"commits"`
	} `json:"journal"`
}

// status asks a running supervise for its status over the control socket
// (through the supervise binary, so the harness does not depend on the
// supervisor package's Go API), and returns how long the answer took.
func (b *bench) status(state string) (status, time.Duration, error) {
	var st status
	t := time.Now()
	out, err := exec.Command(b.supervise, "status", "--json", "--state-dir", state).Output()
	d := time.Since(t)
	if err != nil {
		return st, d, fmt.Errorf("supervise status: %v", err)
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return st, d, err
	}
	if st.Notify == nil {
		return st, d, fmt.Errorf("status came from the journal, not a running supervise")
	}
	return st, d, nil
}

func dropped(st status) uint64 {
	var n uint64
	for _, v := range st.Notify.Dropped {
		n += v
	}
	return n
}

// waitLine polls a file for a line starting with prefix and returns it.
func (b *bench) waitLine(path, prefix string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), prefix) {
					f.Close()
					return sc.Text(), nil
				}
			}
			f.Close()
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no %q in %s within %s", prefix, path, timeout)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-b.ctx.Done():
			return "", b.ctx.Err()
		}
	}
}

// agentRun is one supervise running bench/agent.
type agentRun struct {
	p     *proc
	state string
	out   string
	log   string
	agent int
}

func (b *bench) startAgent(sv svBin, name string, svArgs []string, env ...string) (*agentRun, error) {
	return b.startAgentWait(sv, name, svArgs, 20*time.Second, env...)
}

// startAgentWait is startAgent waiting at most wait for the agent's ready
// line; 0 returns at once (the caller waits, so many can start together).
func (b *bench) startAgentWait(sv svBin, name string, svArgs []string, wait time.Duration, env ...string) (*agentRun, error) {
	dir := filepath.Join(b.work, sv.name+"-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	a := &agentRun{state: filepath.Join(dir, "state"), out: filepath.Join(dir, "agent.out"), log: filepath.Join(dir, "log")}
	argv := append([]string{sv.path, "run", "--state-dir", a.state}, svArgs...)
	argv = append(argv, "--", b.agent)
	p, err := b.start(argv, baseEnv(append(env, "BENCH_OUT="+a.out)...), dir, a.log)
	if err != nil {
		return nil, err
	}
	a.p = p
	if wait == 0 {
		return a, nil
	}
	line, err := b.waitLine(a.out, "ready ", wait)
	if err != nil {
		p.stop(syscall.SIGKILL, 0)
		return nil, fmt.Errorf("%v; log: %s", err, tail(a.log, 5))
	}
	fmt.Sscanf(line, "ready %d", &a.agent)
	return a, nil
}

func (a *agentRun) stop() { a.p.stop(syscall.SIGTERM, 15*time.Second) }

// intake measures heartbeat intake: an agent under supervise --watchdog 1s
// blasts WATCHDOG=1 datagrams from one connected socket as fast as the
// socket takes them (a sender blocks while supervise's queue is full, so
// its rate is supervise's intake rate). supervise's own counters give the
// datagrams accepted, /proc its CPU time; liveness means no watchdog kill
// and a control request answered during the blast.
func (b *bench) intake() error {
	for _, payload := range []string{"plain", "session"} {
		for _, sv := range b.svs {
			if err := b.intakeOne(sv, payload); err != nil {
				b.add(row{"heartbeat intake", sv.name + ", " + payload, "failed", err.Error(), "> 100 000/s", "**missed**"})
			}
		}
	}
	return nil
}

func (b *bench) intakeOne(sv svBin, payload string) error {
	progress("heartbeat intake: %s, %s WATCHDOG=1 for %s", sv.name, payload, b.cfg.blast)
	a, err := b.startAgent(sv, "intake-"+payload, []string{"--watchdog", "1s"},
		"BENCH_MODE=blast", "BENCH_PAYLOAD="+payload, "BENCH_DURATION="+b.cfg.blast.String())
	if err != nil {
		return err
	}
	defer a.stop()
	st0, _, err := b.status(a.state)
	if err != nil {
		return err
	}
	cpu0, err := cpuTime(a.p.pid())
	if err != nil {
		return err
	}
	acpu0, _ := cpuTime(a.agent)
	if err := syscall.Kill(a.agent, syscall.SIGUSR1); err != nil {
		return err
	}
	// A control request in the middle of the blast: the loop must answer.
	time.Sleep(b.cfg.blast / 2)
	_, during, derr := b.status(a.state)
	line, err := b.waitLine(a.out, "done ", b.cfg.blast+20*time.Second)
	if err != nil {
		return err
	}
	var sent, failed, ns int64
	fmt.Sscanf(line, "done sent=%d failed=%d ns=%d", &sent, &failed, &ns)
	time.Sleep(100 * time.Millisecond) // let the socket queue drain
	cpu1, err := cpuTime(a.p.pid())
	if err != nil {
		return err
	}
	acpu1, _ := cpuTime(a.agent)
	st1, _, err := b.status(a.state)
	if err != nil {
		return err
	}
	mem, _ := readMem(a.p.pid())
	// One watchdog period and a half later: still the same run?
	time.Sleep(1500 * time.Millisecond)
	st2, _, err := b.status(a.state)
	if err != nil {
		return err
	}
	accepted := st1.Notify.Accepted - st0.Notify.Accepted
	drops := dropped(st1) - dropped(st0)
	perSec := float64(sent) / (float64(ns) / 1e9)
	cpu := cpu1 - cpu0
	var watchdogKills int
	for _, r := range st2.Runs {
		if r.Reason == "watchdog" {
			watchdogKills++
		}
	}
	live := st2.Child.Run == st0.Child.Run && st2.Child.Restarts == st0.Child.Restarts && watchdogKills == 0 && derr == nil
	liveness := fmt.Sprintf("no watchdog kill, same run, `supervise status` answered in %s mid-blast", ms(during))
	if !live {
		liveness = fmt.Sprintf("LIVENESS LOST: run %d→%d, %d watchdog kills, status mid-blast: %v", st0.Child.Run, st2.Child.Run, watchdogKills, derr)
	}
	detail := fmt.Sprintf("%d sent in %s, %d accepted, %d dropped, %d send errors; %s", sent, ms(time.Duration(ns)), accepted, drops, failed, liveness)
	ok := perSec > 100_000 && live && accepted >= uint64(sent) && drops == 0
	b.add(row{"heartbeat intake (1 sender, --watchdog 1s)", sv.name + ", " + payload + " WATCHDOG=1", rate(perSec), detail, "> 100 000/s, no loss of liveness", metMissed(ok)})
	per := func(d time.Duration) time.Duration {
		return time.Duration(float64(d) / float64(max(accepted, 1)) * 1000)
	}
	capacity := float64(accepted) / cpu.Seconds()
	b.add(row{"CPU per 1 000 heartbeats", sv.name + ", " + payload, ms(per(cpu)),
		fmt.Sprintf("utime+stime %s for %d datagrams (/proc/PID/stat, 10 ms ticks), so %s per core of supervise CPU; the sending agent used %s per 1 000",
			ms(cpu), accepted, rate(capacity), ms(per(acpu1-acpu0))), "", ""})
	b.memRow(sv.name+" during the "+payload+" heartbeat blast", mem)
	return nil
}

// memRow adds a peak RSS row for supervise under some load.
func (b *bench) memRow(subject string, m memStatus) {
	if m.hwm == 0 {
		return
	}
	b.add(row{"peak RSS (VmHWM)", subject, mib(m.hwm), fmt.Sprintf("VmRSS %s now (anon %s, file %s)", mib(m.rss), mib(m.anon), mib(m.file)),
		"< 15 MiB", metMissed(m.hwm < 15*1024)})
}
