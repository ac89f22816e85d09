package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/internal/trace"
	"github.com/supervise-dev/supervise/journal"
)

// stamp is one line of the reporter: when it was exec'd, and its pid.
type stamp struct {
	ns  int64
	pid int
}

// stampFIFO makes a FIFO at path and reads reporter lines from it. The
// harness holds it open read-write, so a reporter's open never blocks and
// the reader never sees EOF between children.
func (b *bench) stampFIFO(path string) (<-chan stamp, error) {
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	b.onCleanup(func() { f.Close() })
	c := make(chan stamp, 64)
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var s stamp
			if _, err := fmt.Sscanf(sc.Text(), "%d %d", &s.ns, &s.pid); err == nil {
				c <- s
			}
		}
	}()
	return c, nil
}

// subject is one supervisor under the restart measurement.
type subject struct {
	name     string
	version  string
	p        *proc
	pid      int    // the supervisor process whose memory is read
	childExe string // what the supervised child runs, to check a pid before killing it
	log      string
	stamps   <-chan stamp
	cur      stamp
	seen     map[int]bool
	lat      sample
	kills    []kill // each kill's time and the next exec, for the breakdown
	err      error
	mem      memStatus
	stopSig  syscall.Signal
	dir      string
	// supervise marks a supervise binary (targets apply to it).
	supervise bool
}

// restart measures restart latency and memory of every supervisor: all of
// them run at once, each with the same reporter as its child, and the kills
// go round-robin in a shuffled order, so slow drifts of the shared machine
// hit every row alike.
func (b *bench) restart() error {
	progress("restart latency: starting supervisors")
	var subs []*subject
	add := func(s *subject, err error) {
		if err != nil {
			b.note("restart: %s not measured: %v", s.name, err)
			return
		}
		subs = append(subs, s)
	}
	if b.respawnC != "" {
		add(b.startFloor("floor: fork/exec/wait loop (C)", b.respawnC))
	}
	add(b.startFloor("floor: fork/exec/wait loop (Go)", b.respawnGo))
	for _, sv := range b.svs {
		add(b.startSupervise(sv, variant{}))
	}
	for _, sv := range b.svs {
		add(b.startSupervise(sv, variant{ping: pingEvery}))
	}
	// What a run's own cgroup costs a restart (mkdir, the clone into it,
	// the rmdir): the binary under test only.
	add(b.startSupervise(b.svs[0], variant{args: []string{"--cgroup", "off"}, kind: "nocgroup"}))
	if !b.cfg.noPeers {
		for _, start := range []func() (*subject, error){b.startRunsv, b.startS6, b.startSupervisord} {
			s, err := start()
			if s == nil {
				continue // not installed: noted
			}
			add(s, err)
		}
	}
	for _, s := range subs {
		select {
		case st := <-s.stamps:
			s.cur = st
			s.seen[st.pid] = true
		case <-time.After(15 * time.Second):
			s.err = fmt.Errorf("its first child never started; log: %s", tail(s.log, 5))
		case <-b.ctx.Done():
			return b.ctx.Err()
		}
	}
	progress("restart latency: %d kill -9s per supervisor, round-robin", b.cfg.kills)
	const healthy = 1200 * time.Millisecond // children must have lived > 1s
	for round := range b.cfg.kills {
		for _, i := range rand.Perm(len(subs)) {
			s := subs[i]
			if s.err != nil {
				continue
			}
			if err := b.killOne(s, healthy); err != nil {
				s.err = fmt.Errorf("kill %d: %v", round+1, err)
			}
			select {
			case <-time.After(b.cfg.settle):
			case <-b.ctx.Done():
				return b.ctx.Err()
			}
		}
	}
	for _, s := range subs {
		if m, err := readMem(s.pid); err == nil {
			s.mem = m
		}
	}
	for _, s := range subs {
		b.stopSubject(s)
	}
	b.restartRows(subs)
	fs := &fsyncProbe{dir: b.work}
	if err := fs.run(500 * time.Millisecond); err != nil {
		fs = nil
	}
	cold, err := coldCommits(b.work, 20, b.cfg.settle)
	if err != nil {
		b.note("restart: the cold commit probe failed: %v", err)
	} else {
		l := cold.sorted()
		b.add(row{"commit floor after idle (3 pages + fdatasync, 1 page + fdatasync, each after " + b.cfg.settle.String() + " without I/O)",
			"raw pwrite + fdatasync, same filesystem", ms(l.q(0.5)) + " median", fmt.Sprintf("p10 %s, p90 %s, n=%d", ms(l.q(0.1)), ms(l.q(0.9)), len(l)), "", ""})
	}
	for _, s := range subs {
		if s.supervise && s.err == nil {
			b.restartBreakdown(s, fs, cold)
		}
	}
	return nil
}

// killOne waits until the current child of s has lived long enough to be
// healthy, kills it with SIGKILL and waits for the next child's stamp.
func (b *bench) killOne(s *subject, healthy time.Duration) error {
	for drained := false; !drained; {
		select {
		case st := <-s.stamps: // an unexpected restart: follow it
			s.cur = st
			s.seen[st.pid] = true
		default:
			drained = true
		}
	}
	if age := time.Duration(monoNow() - s.cur.ns); age < healthy {
		select {
		case <-time.After(healthy - age):
		case <-b.ctx.Done():
			return b.ctx.Err()
		}
	}
	if !exeIs(s.cur.pid, s.childExe) {
		return fmt.Errorf("pid %d from the last stamp is not the reporter", s.cur.pid)
	}
	t0 := monoNow()
	if err := syscall.Kill(s.cur.pid, syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case st := <-s.stamps:
		if st.ns < t0 {
			return fmt.Errorf("stamp older than the kill")
		}
		s.lat = append(s.lat, time.Duration(st.ns-t0))
		s.kills = append(s.kills, kill{t0, st.ns})
		s.cur = st
		s.seen[st.pid] = true
		return nil
	case <-time.After(15 * time.Second):
		return fmt.Errorf("no new child within 15s of the kill; log: %s", tail(s.log, 5))
	case <-b.ctx.Done():
		return b.ctx.Err()
	}
}

// stopSubject stops the supervisor and kills any reporter it left behind.
func (b *bench) stopSubject(s *subject) {
	if !s.p.stop(s.stopSig, 10*time.Second) {
		b.note("restart: %s did not exit within 10s of %s: killed", s.name, s.stopSig)
	}
	s.killChildren()
}

func (b *bench) newSubject(name, kind string) (*subject, error) {
	dir := filepath.Join(b.work, "restart-"+kind)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c, err := b.stampFIFO(filepath.Join(dir, "stamps.fifo"))
	if err != nil {
		return nil, err
	}
	s := &subject{name: name, dir: dir, stamps: c, seen: map[int]bool{}, childExe: b.reporter,
		log: filepath.Join(dir, "log"), stopSig: syscall.SIGTERM}
	// runsv and s6 put their child in a session of its own: after an
	// interrupt, kill every reporter this subject started.
	b.onCleanup(func() { s.killChildren() })
	return s, nil
}

// killChildren kills every child of s still alive, checked by executable.
func (s *subject) killChildren() {
	for pid := range s.seen {
		if alive(pid) && exeIs(pid, s.childExe) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func (b *bench) startFloor(name, bin string) (*subject, error) {
	s, err := b.newSubject(name, filepath.Base(bin))
	if err != nil {
		return &subject{name: name}, err
	}
	s.stopSig = syscall.SIGKILL
	s.p, err = b.start([]string{bin, b.reporter}, baseEnv("REPORTER_OUT="+filepath.Join(s.dir, "stamps.fifo")), s.dir, s.log)
	if err != nil {
		return s, err
	}
	s.pid = s.p.pid()
	return s, nil
}

// pingEvery is how often the pinging agent of the second supervise rows
// sends WATCHDOG=1: a heartbeat is waiting in supervise at every kill, as
// with an agent whose hooks or heartbeat thread talk to it.
const pingEvery = 100 * time.Millisecond

// variant is a supervise restart row's difference from the plain one: the
// reporter pings every ping (> 0), supervise gets args (and the row's
// work directory the suffix kind).
type variant struct {
	ping time.Duration
	args []string
	kind string
}

// startSupervise starts sv over the reporter, as v says (a row of its own).
func (b *bench) startSupervise(sv svBin, v variant) (*subject, error) {
	name, kind, env := sv.name, sv.name, []string(nil)
	if v.ping > 0 {
		name = fmt.Sprintf("%s, agent pinging every %v", sv.name, v.ping)
		kind += "-ping"
		env = append(env, fmt.Sprintf("REPORTER_PING_MS=%d", v.ping.Milliseconds()))
	}
	if len(v.args) > 0 {
		name += ", " + strings.Join(v.args, " ")
		kind += "-" + v.kind
	}
	s, err := b.newSubject(name, kind)
	if err != nil {
		return &subject{name: name}, err
	}
	s.supervise = true
	state := filepath.Join(s.dir, "state")
	// --healthy-after 1s: the harness kills each child after 1.2 s, a
	// healthy run, so the relaunch is immediate (the default is 10 s, under
	// which every kill here would be a quick death and back off).
	// Its trace points (internal/trace) go to dir/trace: the breakdown.
	argv := append([]string{sv.path, "run", "--healthy-after", "1s", "--state-dir", state}, v.args...)
	s.p, err = b.start(append(argv, "--", b.reporter),
		baseEnv(append(env, "REPORTER_OUT="+filepath.Join(s.dir, "stamps.fifo"), trace.EnvVar+"="+filepath.Join(s.dir, "trace"))...), s.dir, s.log)
	if err != nil {
		return s, err
	}
	s.pid = s.p.pid()
	return s, nil
}

// serviceDir makes a runit/s6 service directory whose run file is a copy
// of the reporter binary itself (no shell in between).
func (b *bench) serviceDir(s *subject) (string, error) {
	svc := filepath.Join(s.dir, "service")
	if err := os.MkdirAll(svc, 0o755); err != nil {
		return "", err
	}
	src, err := os.ReadFile(b.reporter)
	if err != nil {
		return "", err
	}
	run := filepath.Join(svc, "run")
	if err := os.WriteFile(run, src, 0o755); err != nil {
		return "", err
	}
	s.childExe = run
	return svc, nil
}

// debVersion is the installed version of a Debian package, "" if unknown.
func debVersion(pkg string) string {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", pkg).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// peer looks up a peer's binary; a nil subject with no error means absent.
func (b *bench) peer(name, bin, pkg string) (*subject, string) {
	path, err := exec.LookPath(bin)
	if err != nil {
		b.note("restart: %s not installed (`apt-get install %s`): skipped", bin, pkg)
		return nil, ""
	}
	return &subject{name: name, version: debVersion(pkg)}, path
}

func (b *bench) startRunsv() (*subject, error) {
	return b.startServiceDirPeer("runsv (runit)", "runsv", "runit", "runsv")
}

func (b *bench) startS6() (*subject, error) {
	return b.startServiceDirPeer("s6-supervise (s6)", "s6-supervise", "s6", "s6")
}

// startServiceDirPeer starts a supervisor that takes a service directory
// (runsv, s6-supervise) on the reporter.
func (b *bench) startServiceDirPeer(name, binName, pkg, dir string) (*subject, error) {
	ps, bin := b.peer(name, binName, pkg)
	if ps == nil {
		return nil, nil
	}
	s, err := b.newSubject(ps.name, dir)
	if err != nil {
		return ps, err
	}
	s.version = ps.version
	svc, err := b.serviceDir(s)
	if err != nil {
		return s, err
	}
	s.p, err = b.start([]string{bin, svc}, baseEnv("REPORTER_OUT="+filepath.Join(s.dir, "stamps.fifo")), s.dir, s.log)
	if err != nil {
		return s, err
	}
	s.pid = s.p.pid()
	return s, nil
}

func (b *bench) startSupervisord() (*subject, error) {
	ps, bin := b.peer("supervisord (supervisor)", "supervisord", "supervisor")
	if ps == nil {
		return nil, nil
	}
	s, err := b.newSubject(ps.name, "supervisord")
	if err != nil {
		return ps, err
	}
	s.version = ps.version
	d := s.dir
	conf := fmt.Sprintf(`[unix_http_server]
file=%[1]s/supervisor.sock

[supervisord]
nodaemon=true
logfile=%[1]s/supervisord.log
pidfile=%[1]s/supervisord.pid
childlogdir=%[1]s
user=root

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://%[1]s/supervisor.sock

[program:reporter]
command=%[2]s %[1]s/stamps.fifo
autostart=true
autorestart=true
startsecs=1
startretries=1000000
stopsignal=TERM
stdout_logfile=NONE
stderr_logfile=NONE
`, d, b.reporter)
	if os.Geteuid() != 0 {
		conf = strings.Replace(conf, "user=root\n", "", 1)
	}
	cf := filepath.Join(d, "supervisord.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		return s, err
	}
	s.p, err = b.start([]string{bin, "-n", "-c", cf}, baseEnv(), d, s.log)
	if err != nil {
		return s, err
	}
	s.pid = s.p.pid()
	return s, nil
}

// journaledDeaths counts the dirty SIGKILL deaths in supervise's journal
// (read after it stopped), to show each kill was recorded.
func journaledDeaths(state string) (int, error) {
	db, err := journal.Open(filepath.Join(state, "journal.db"), journal.Options{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	n := 0
	err = db.View(func(tx *journal.Tx) error {
		runs, err := tx.LastRuns(1 << 20)
		for _, r := range runs {
			if r.Dirty && r.Signal == int(syscall.SIGKILL) {
				n++
			}
		}
		return err
	})
	return n, err
}

func (b *bench) restartRows(subs []*subject) {
	var floor time.Duration
	floorName := ""
	for _, s := range subs {
		if strings.HasPrefix(s.name, "floor") && s.err == nil && len(s.lat) > 0 {
			if m := s.lat.sorted().q(0.5); floor == 0 || m < floor {
				floor, floorName = m, s.name
			}
		}
	}
	var floorSub *subject
	for _, s := range subs {
		if s.name == floorName {
			floorSub = s
		}
	}
	var peerBest time.Duration
	for _, s := range subs {
		if !strings.HasPrefix(s.name, "floor") && !s.supervise && s.err == nil && len(s.lat) > 0 {
			if m := s.lat.sorted().q(0.5); peerBest == 0 || m < peerBest {
				peerBest = m
			}
		}
	}
	for _, s := range subs {
		name := s.name
		if s.version != "" {
			name += " " + s.version
		}
		if s.err != nil {
			b.add(row{"restart latency", name, "failed", s.err.Error(), "", ""})
			continue
		}
		l := s.lat.sorted()
		med := l.q(0.5)
		value := ms(med) + " median"
		if floor > 0 && !strings.HasPrefix(s.name, "floor") {
			value += fmt.Sprintf(" (%.1f× floor)", float64(med)/float64(floor))
		}
		detail := fmt.Sprintf("p10 %s, p90 %s, min %s, max %s; n=%d", ms(l.q(0.1)), ms(l.q(0.9)), ms(l[0]), ms(l[len(l)-1]), len(l))
		target, verdict := "", ""
		if floorSub != nil && s != floorSub && len(s.lat) == len(floorSub.lat) {
			// Paired: both were killed in the same round, within about a
			// second of each other, so a shared slow spell hits both.
			var ratios sample
			for i := range s.lat {
				ratios = append(ratios, time.Duration(float64(s.lat[i])/float64(floorSub.lat[i])*1000))
			}
			r := ratios.sorted()
			detail += fmt.Sprintf("; paired per-round ratio to the floor: median %.2f×, p10 %.2f×, p90 %.2f×",
				float64(r.q(0.5))/1000, float64(r.q(0.1))/1000, float64(r.q(0.9))/1000)
		}
		if s.supervise {
			target = "≤ 1.5× floor and < every peer"
			ok := floor > 0 && float64(med) <= 1.5*float64(floor)
			if peerBest > 0 {
				ok = ok && med < peerBest
			}
			verdict = metMissed(ok)
			if n, err := journaledDeaths(filepath.Join(s.dir, "state")); err == nil {
				detail += fmt.Sprintf("; journal holds %d dirty SIGKILL deaths for %d kills", n, len(l))
			}
		}
		if s.name == floorName {
			target = "the floor"
		}
		b.add(row{"restart latency", name, value, detail, target, verdict})
	}
	for _, s := range subs {
		if s.mem.hwm == 0 {
			continue
		}
		name := s.name
		if s.version != "" {
			name += " " + s.version
		}
		detail := fmt.Sprintf("VmRSS %s now (anon %s, file %s)", mib(s.mem.rss), mib(s.mem.anon), mib(s.mem.file))
		target, verdict := "", ""
		if s.supervise {
			target = "≤ 10 MiB"
			verdict = metMissed(s.mem.hwm <= 10*1024)
		}
		b.add(row{"peak RSS (VmHWM) after the restarts", name, mib(s.mem.hwm), detail, target, verdict})
	}
}

func metMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}
