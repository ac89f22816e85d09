// Command testagent is a scriptable agent for supervise's integration and
// chaos tests. It runs the steps of a script, one after another, and appends
// one line per event to $TESTAGENT_LOG:
//
//	run=<SUPERVISE_RUN> pid=<pid> <event> [details]
//
// The script comes from $TESTAGENT_SCRIPT_<run> if set (so each run can
// behave differently), else $TESTAGENT_SCRIPT, else "hang". Steps are
// separated by ';':
//
//	log TEXT          write "log TEXT"
//	sleep DURATION    sleep
//	exit N            exit with status N
//	hang              block forever (until a signal)
//	alloc N           allocate and touch N MiB
//	listen            run script lines written to $TESTAGENT_FIFO, forever;
//	                  logs "ran <line>" after each
//	ignore-term       ignore SIGTERM from now on
//	term-exit N       exit N on SIGTERM
//	grandchild        start `sleep 1000` in a new session (escapes the group)
//	groupchild        start `sleep 1000` in our process group
//	sh CMD            run `sh -c CMD` and wait (as an agent's hook would);
//	                  logs "sh-ok" or "sh-err ERR"
//
// Protocol steps (over $NOTIFY_SOCKET with the notify client):
//
//	turn-begin S T [PROMPT]   turn-end S T OUTCOME   waiting S   phase S PHASE [TOOL [DETAIL]]
//	wait-for S input|approval|reconnect   extend USEC [S] (EXTEND_TIMEOUT_USEC)
//	resumed S   closed S   heartbeat S   ping   ready   status TEXT   trigger
//	barrier             wait until journaled: logs "barrier-ok" or "barrier-err ERR"
//	pinger DURATION     WATCHDOG=1 every DURATION in the background
//	burst N             N WATCHDOG=1 datagrams as fast as possible on one
//	                    socket; logs "burst sent=N failed=M"
//	badinput            one datagram of every malformed class; logs "badinput done"
//	bench-barrier N     N × (phase marker + barrier); logs "bench-barrier N NS"
//	resume-file         log "resume-file <contents>" of $SUPERVISE_RESUME_FILE
//
// At start it logs "start" and checks that no other process carrying the
// same $TESTAGENT_ID (other than its own ancestors) is alive: if one is, it
// logs "overlap <pids>", which tests treat as a violation of "no two
// children ever run at once".
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var logFile *os.File

// hog keeps allocated memory alive (the alloc step).
var hog [][]byte

// recordEnd closes every log record; the test's reader (harness_test.go)
// drops a line without it. A write of a record can be cut short when the
// agent is killed: the kernel stops a buffered write at a page boundary
// once SIGKILL is pending. Each record therefore also starts on a new line,
// so the next record never runs on from a torn one.
const recordEnd = "\t$"

func logf(format string, args ...any) {
	line := fmt.Sprintf("\nrun=%s pid=%d %s%s\n", os.Getenv("SUPERVISE_RUN"), os.Getpid(), fmt.Sprintf(format, args...), recordEnd)
	if logFile != nil {
		logFile.WriteString(line) // O_APPEND: one write per record
	}
}

func main() {
	if p := os.Getenv("TESTAGENT_LOG"); p != "" {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			logFile = f
		}
	}
	// Check before announcing the start: once "start" is logged the test
	// may run other commands.
	others := overlapping()
	logf("start t=%d", time.Now().UnixNano())
	if len(os.Args) > 1 {
		logf("args %s", strings.ReplaceAll(strings.Join(os.Args[1:], " | "), "\n", " "))
	}
	if len(others) > 0 {
		logf("overlap %v", others)
	}
	script := os.Getenv("TESTAGENT_SCRIPT_" + os.Getenv("SUPERVISE_RUN"))
	if script == "" {
		script = os.Getenv("TESTAGENT_SCRIPT")
	}
	if script == "" {
		script = "hang"
	}
	for _, step := range strings.Split(script, ";") {
		step = strings.TrimSpace(step)
		if step != "" {
			run(step)
		}
	}
	logf("done")
}

func run(step string) {
	verb, arg, _ := strings.Cut(step, " ")
	switch verb {
	case "log":
		logf("log %s", arg)
	case "say":
		fmt.Fprintln(os.Stderr, arg) // as a CLI says why it exits
		logf("said")
	case "sleep":
		d, _ := time.ParseDuration(arg)
		time.Sleep(d)
	case "exit":
		n, _ := strconv.Atoi(arg)
		logf("exit %d", n)
		os.Exit(n)
	case "alloc":
		// Allocate and touch N MiB, kept live.
		n, _ := strconv.Atoi(arg)
		for i := 0; i < n; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			hog = append(hog, b)
		}
		logf("alloc %d", n)
	case "listen":
		logf("listen")
		listen()
	case "hang":
		logf("hang")
		for {
			time.Sleep(time.Hour) // not select{}: the runtime would call that a deadlock
		}
	case "ignore-int":
		signal.Ignore(syscall.SIGINT)
		logf("ignoring-int")
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		logf("ignoring-term")
	case "term-exit":
		n, _ := strconv.Atoi(arg)
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		go func() {
			<-c
			logf("got-term")
			os.Exit(n)
		}()
	case "sh":
		// Run arg with sh -c as a process of the agent's tree (a hook);
		// ';' cannot appear in it (it separates steps).
		cmd := exec.Command("sh", "-c", arg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			logf("sh-err %v", err)
			return
		}
		logf("sh-ok")
	case "grandchild", "groupchild":
		cmd := exec.Command("sleep", "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: verb == "grandchild"}
		if err := cmd.Start(); err != nil {
			logf("error %v", err)
			return
		}
		logf("%s %d", verb, cmd.Process.Pid)
	case "daemon":
		// A double-forking daemon: sh starts sleep in a new session in the
		// background and exits at once, so sleep is re-parented.
		out, err := exec.Command("sh", "-c", "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!").Output()
		if err != nil {
			logf("error %v", err)
			return
		}
		logf("daemon %s", strings.TrimSpace(string(out)))
	case "stdout-holder":
		// A grandchild that keeps our stdout (supervise's) open.
		cmd := exec.Command("sleep", "1000")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			logf("error %v", err)
			return
		}
		logf("stdout-holder %d", cmd.Process.Pid)
	case "exec":
		// Run a command as our child and wait for it.
		err := exec.Command("/bin/sh", "-c", arg).Run()
		logf("exec-done %v", err)
	case "exit-run":
		// Exit with a status derived from the run number: run%50+1.
		n, _ := strconv.Atoi(os.Getenv("SUPERVISE_RUN"))
		logf("exit %d", n%50+1)
		os.Exit(n%50 + 1)
	case "init":
		// Be a PID namespace's init: reap every child, forever.
		logf("init")
		for {
			var ws syscall.WaitStatus
			if _, err := syscall.Wait4(-1, &ws, 0, nil); err != nil {
				time.Sleep(50 * time.Millisecond)
			}
		}
	case "bg-read":
		// Leave the terminal's foreground process group and read it: the
		// kernel stops us with SIGTTIN.
		if err := syscall.Setpgid(0, 0); err != nil {
			logf("error setpgid %v", err)
			return
		}
		st, _ := os.ReadFile("/proc/self/status")
		ign := ""
		for _, l := range strings.Split(string(st), "\n") {
			if strings.HasPrefix(l, "SigIgn:") || strings.HasPrefix(l, "SigBlk:") {
				ign += strings.ReplaceAll(l, "\t", " ") + " "
			}
		}
		logf("bg-read %s", ign)
		buf := make([]byte, 1)
		n, err := os.Stdin.Read(buf)
		logf("bg-read-returned %d %v", n, err)
	default:
		if !protocol(verb, strings.Fields(arg), arg) {
			logf("error unknown step %q", step)
		}
	}
}

// listen executes the script lines written to $TESTAGENT_FIFO, one writer
// at a time, forever.
func listen() {
	path := os.Getenv("TESTAGENT_FIFO")
	for {
		b, err := os.ReadFile(path) // blocks until a writer opens, ends at its close
		if err != nil {
			logf("error fifo %v", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line = strings.TrimSpace(line); line == "" {
				continue
			}
			for _, step := range strings.Split(line, ";") {
				if step = strings.TrimSpace(step); step != "" {
					run(step)
				}
			}
			logf("ran %s", line)
		}
	}
}

// overlapping lists live processes with our TESTAGENT_ID that are not our
// ancestors (supervise and the test itself carry it too).
func overlapping() []int {
	id := os.Getenv("TESTAGENT_ID")
	if id == "" {
		return nil
	}
	ancestors := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !ancestors[pid]; pid = ppid(pid) {
		ancestors[pid] = true
	}
	needle := []byte("TESTAGENT_ID=" + id)
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || ancestors[pid] {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, needle) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue // a zombie is dead
			}
		}
		// Only exact matches of the whole entry count.
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, needle) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

func ppid(pid int) int {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(st, ')')
	f := bytes.Fields(st[i+2:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(string(f[1]))
	return n
}
