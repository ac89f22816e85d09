package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

//go:embed csrc/reporter.c
var reporterC []byte

//go:embed csrc/respawn.c
var respawnC []byte

// bench holds the binaries, the rows measured so far and what to clean up.
type bench struct {
	cfg  config
	work string
	ctx  context.Context

	supervise string  // the supervise binary under test
	svs       []svBin // it, and -alt if given, measured side by side
	reporter  string  // the child of every restart measurement
	reporterK string  // "static C (gcc ...)" or "Go"
	respawnC  string  // "" without gcc
	respawnGo string
	agent     string
	noop      string // a static Go binary that does nothing: the hook rows' floor
	notifyBin string // supervise-notify of the tree the bench runs from
	gcc       string // gcc version line, "" if absent

	rows  []row
	notes []string

	mu   sync.Mutex
	undo []func()
}

// svBin is one supervise binary measured.
type svBin struct{ name, path string }

// row is one line of the table.
type row struct {
	what, subject, value, detail, target, verdict string
}

func (b *bench) add(r row) { b.rows = append(b.rows, r) }

func (b *bench) note(format string, args ...any) {
	b.notes = append(b.notes, fmt.Sprintf(format, args...))
}

// onCleanup registers fn to run at exit (in reverse order), also after an
// error or an interrupt, so that no supervisor or child outlives the run.
func (b *bench) onCleanup(fn func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.undo = append(b.undo, fn)
}

func (b *bench) runCleanup() {
	b.mu.Lock()
	undo := b.undo
	b.undo = nil
	b.mu.Unlock()
	for i := len(undo) - 1; i >= 0; i-- {
		undo[i]()
	}
}

// moduleRoot is the directory of go.mod of the module the harness belongs
// to, found from the working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run it from inside the supervise module: go run ./bench")
	}
	return filepath.Dir(mod), nil
}

func (b *bench) build() error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(b.work, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	goBuild := func(out, pkg string) error {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir = root
		// The recommended production build (README): static, pure Go, so no
		// libc is mapped into supervise.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
		}
		return nil
	}
	if b.cfg.supervise != "" {
		p, err := filepath.Abs(b.cfg.supervise)
		if err != nil {
			return err
		}
		b.supervise = p
	} else {
		b.supervise = filepath.Join(bin, "supervise")
		if err := goBuild(b.supervise, "./cmd/supervise"); err != nil {
			return err
		}
	}
	// The tree's supervise-notify, also with -supervise: the hook rows
	// measure it beside the supervise under test.
	b.notifyBin = filepath.Join(bin, "supervise-notify")
	if err := goBuild(b.notifyBin, "./cmd/supervise-notify"); err != nil {
		return err
	}
	b.svs = []svBin{{"supervise", b.supervise}}
	if b.cfg.alt != "" {
		p, err := filepath.Abs(b.cfg.alt)
		if err != nil {
			return err
		}
		b.svs = append(b.svs, svBin{b.cfg.altName, p})
	}
	b.respawnGo = filepath.Join(bin, "respawn-go")
	b.agent = filepath.Join(bin, "agent")
	b.noop = filepath.Join(bin, "noop")
	goReporter := filepath.Join(bin, "reporter-go")
	for out, pkg := range map[string]string{b.respawnGo: "./bench/respawn", b.agent: "./bench/agent", goReporter: "./bench/reporter", b.noop: "./bench/noop"} {
		if err := goBuild(out, pkg); err != nil {
			return err
		}
	}
	b.reporter, b.reporterK = goReporter, "Go (bench/reporter; no gcc found)"
	if gcc, err := exec.LookPath("gcc"); err == nil {
		v, _ := exec.Command(gcc, "--version").Output()
		b.gcc = strings.SplitN(string(v), "\n", 2)[0]
		cc := func(name string, src []byte) (string, error) {
			c := filepath.Join(bin, name+".c")
			out := filepath.Join(bin, name+"-c")
			if err := os.WriteFile(c, src, 0o644); err != nil {
				return "", err
			}
			// Static when libc.a is installed, else dynamic (said in the header).
			for _, static := range []bool{true, false} {
				args := []string{"-O2", "-Wall", "-o", out, c}
				if static {
					args = append([]string{"-static"}, args...)
				}
				if msg, err := exec.Command(gcc, args...).CombinedOutput(); err == nil {
					if !static {
						b.note("%s: built dynamically linked (no static libc)", name)
					}
					return out, nil
				} else if !static {
					return "", fmt.Errorf("gcc %s: %v\n%s", name, err, msg)
				}
			}
			return out, nil
		}
		if p, err := cc("reporter", reporterC); err == nil {
			b.reporter, b.reporterK = p, "static C (bench/csrc/reporter.c, gcc -O2 -static)"
		} else {
			b.note("C reporter not built (%v): using the Go reporter", err)
		}
		if p, err := cc("respawn", respawnC); err == nil {
			b.respawnC = p
		} else {
			b.note("C respawn floor not built: %v", err)
		}
	}
	return nil
}

// baseEnv is the harness's environment without anything that would steer
// a supervise or tell it it runs under another supervisor.
func baseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SUPERVISE_") || strings.HasPrefix(kv, "NOTIFY_SOCKET=") ||
			strings.HasPrefix(kv, "WATCHDOG_") || strings.HasPrefix(kv, "REPORTER_OUT=") ||
			strings.HasPrefix(kv, "BENCH_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// proc is a process the harness started; stop ends it and waits.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// start starts argv with env, stdout and stderr into logPath, in a process
// group of its own, and registers its stop for cleanup.
func (b *bench) start(argv []string, env []string, dir, logPath string) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	b.onCleanup(func() { p.stop(syscall.SIGKILL, 0) })
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig and waits up to grace for the process to exit, then kills
// its whole process group. It reports whether it exited within grace.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) bool {
	if p.exited() {
		return true
	}
	_ = p.cmd.Process.Signal(sig)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.done
	return false
}

// tail returns the last lines of a log file, for error messages.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
