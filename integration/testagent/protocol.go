package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/notify"
	"github.com/supervise-dev/supervise/resume"
)

var client = &notify.Client{Timeout: 2 * time.Second}

// protocol runs a notify step; false means the verb is unknown.
func protocol(verb string, f []string, rest string) bool {
	ctx := context.Background()
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	var err error
	switch verb {
	case "turn-begin":
		prompt := ""
		if len(f) > 2 {
			prompt = strings.Join(f[2:], " ")
		}
		err = client.TurnBegin(ctx, arg(0), arg(1), prompt)
	case "turn-end":
		err = client.TurnEnd(ctx, arg(0), arg(1), marker.Outcome(arg(2)))
	case "waiting":
		err = client.Waiting(ctx, arg(0), arg(1))
	case "wait-for":
		err = client.WaitingFor(ctx, arg(0), "", marker.Wait(arg(1)))
	case "extend":
		// EXTEND_TIMEOUT_USEC=arg(0), for session arg(1) if given.
		msg := "EXTEND_TIMEOUT_USEC=" + arg(0)
		if arg(1) != "" {
			msg += "\nX_SUPERVISE_SESSION=" + arg(1)
		}
		err = client.Notify(ctx, msg)
	case "phase":
		if len(f) > 3 { // phase S tool TOOL DETAIL...
			err = client.ToolPhase(ctx, arg(0), arg(2), strings.Join(f[3:], " "))
		} else {
			err = client.Phase(ctx, arg(0), marker.Phase(arg(1)), arg(2))
		}
	case "resumed":
		err = client.Resumed(ctx, arg(0), arg(1))
	case "closed":
		err = client.Closed(ctx, arg(0))
	case "heartbeat":
		err = client.Heartbeat(ctx, arg(0))
	case "ping":
		err = client.Watchdog(ctx)
	case "ready":
		err = client.Ready(ctx)
	case "status":
		err = client.Status(ctx, rest)
	case "trigger":
		err = client.Notify(ctx, "WATCHDOG=trigger")
	case "term-extend":
		// On SIGTERM: ask for EXTEND_TIMEOUT_USEC=arg(0), take arg(1) to
		// "flush", then exit 0.
		d, _ := time.ParseDuration(arg(1))
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		go func() {
			<-c
			client.Notify(ctx, "EXTEND_TIMEOUT_USEC="+arg(0))
			logf("extending")
			time.Sleep(d)
			logf("flushed")
			os.Exit(0)
		}()
	case "barrier":
		if err := client.Barrier(ctx, 10*time.Second); err != nil {
			logf("barrier-err %v", err)
		} else {
			logf("barrier-ok")
		}
		return true
	case "pinger":
		d, _ := time.ParseDuration(arg(0))
		go func() {
			for {
				client.Watchdog(ctx)
				time.Sleep(d)
			}
		}()
	case "burst":
		n, _ := strconv.Atoi(arg(0))
		start := time.Now()
		sent, failed := burst(n)
		logf("burst sent=%d failed=%d ns=%d", sent, failed, time.Since(start).Nanoseconds())
		return true
	case "badinput":
		badinput()
		logf("badinput done")
		return true
	case "bench-barrier":
		n, _ := strconv.Atoi(arg(0))
		start := time.Now()
		for i := 0; i < n; i++ {
			if err := client.Phase(ctx, "bench", marker.PhaseTool, "t"+strconv.Itoa(i%10)); err != nil {
				logf("error %v", err)
				return true
			}
			if err := client.Barrier(ctx, 10*time.Second); err != nil {
				logf("error %v", err)
				return true
			}
		}
		logf("bench-barrier %d %d", n, time.Since(start).Nanoseconds())
		return true
	case "take-resumes":
		takeResumes()
		return true
	case "chaos":
		n, _ := strconv.ParseUint(arg(0), 10, 64)
		chaos(n)
		return true
	case "fill":
		// N turn-begins on distinct sessions with 1 KiB prompts, each
		// acknowledged: grows the journal (for disk-full tests).
		n, _ := strconv.Atoi(arg(0))
		prompt := strings.Repeat("x", 1000)
		failed := 0
		for i := 0; i < n && failed < 3; i++ { // stop after 3 unacknowledged
			if i > 0 && failed > 0 {
				failed++ // every further attempt after a failure counts too
			}
			fillSeq++
			s := fmt.Sprintf("f%d-%s", fillSeq, os.Getenv("SUPERVISE_RUN"))
			if err := client.TurnBegin(ctx, s, "t", prompt); err != nil {
				logf("notify-err %v", err)
				continue
			}
			if err := client.Barrier(ctx, time.Second); err != nil {
				logf("fill-unacked %s %v", s, err)
				failed++
				continue
			}
			logf("fill-acked %s", s)
		}
		logf("fill-done")
		return true
	case "int-log":
		intLog()
		logf("int-log")
		return true
	case "orphans":
		n, _ := strconv.Atoi(arg(0))
		for i := 0; i < n; i++ {
			spawnOrphan()
		}
		logf("orphans %d", n)
		return true
	case "fdspam":
		n, _ := strconv.Atoi(arg(0))
		fdspam(n)
		logf("fdspam %d", n)
		return true
	case "take-on":
		// On signal arg(0) (e.g. USR1), take the resumes in the file.
		sig := map[string]syscall.Signal{"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "HUP": syscall.SIGHUP}[arg(0)]
		c := make(chan os.Signal, 1)
		signal.Notify(c, sig)
		go func() {
			for range c {
				logf("got-%s", arg(0))
				takeResumes()
			}
		}()
		logf("take-on %s", arg(0))
		return true
	case "raw":
		// Send rest as one datagram, as is ("\n" in it becomes a newline).
		err = client.Notify(ctx, strings.ReplaceAll(rest, `\n`, "\n"))
	case "sure":
		// sure VERB ARGS...: send a protocol step and its barrier again and
		// again until the barrier confirms it (an agent's retry of a marker
		// the supervisor could not take yet); logs "sure-acked N" with the
		// number of attempts.
		sub, subrest, _ := strings.Cut(rest, " ")
		for attempt := 1; ; attempt++ {
			var serr error
			switch sub {
			case "turn-begin":
				serr = client.TurnBegin(ctx, arg(1), arg(2), "")
			case "turn-end":
				serr = client.TurnEnd(ctx, arg(1), arg(2), marker.Outcome(arg(3)))
			default:
				logf("error sure %s", subrest)
				return true
			}
			if serr == nil {
				serr = client.Barrier(ctx, time.Second)
			}
			if serr == nil {
				logf("sure-acked %s %d", subrest, attempt)
				return true
			}
			time.Sleep(50 * time.Millisecond)
		}
	case "resume-file":
		b, err := os.ReadFile(os.Getenv("SUPERVISE_RESUME_FILE"))
		if err != nil {
			logf("resume-file none")
		} else {
			logf("resume-file %s", strings.ReplaceAll(string(b), "\n", " "))
		}
		return true
	default:
		return false
	}
	if err != nil {
		logf("notify-err %s %v", verb, err)
	} else {
		logf("sent %s", verb)
	}
	return true
}

// fillSeq numbers the sessions of the fill step across calls.
var fillSeq int

// taken remembers the resumes this process took, by session and attempt,
// so that a repeated delivery is visible ("dup") instead of acted on twice.
var taken = map[string]bool{}

// takeResumes reads $SUPERVISE_RESUME_FILE and takes every resume in it:
// logs "took SESSION attempt=N message=..." and reports resumed (journaled).
func takeResumes() {
	items, err := resume.ReadFile(os.Getenv("SUPERVISE_RESUME_FILE"))
	if err != nil {
		logf("error resume file: %v", err)
		return
	}
	if len(items) == 0 {
		logf("took none")
	}
	for _, it := range items {
		key := it.Session + "#" + strconv.FormatUint(it.InterruptedRun, 10) + "#" + strconv.Itoa(it.Attempt)
		if taken[key] {
			logf("dup %s attempt=%d", it.Session, it.Attempt)
			continue
		}
		taken[key] = true
		logf("took %s attempt=%d interrupted=%d turn=%s message=%s", it.Session, it.Attempt, it.InterruptedRun, it.Turn, strings.ReplaceAll(it.Message, "\n", " "))
		ctx := context.Background()
		turn := it.Turn
		if turn == "" {
			turn = "-"
		}
		logf("send resumed %s %s", it.Session, turn)
		if err := client.Resumed(ctx, it.Session, it.Turn); err != nil {
			logf("notify-err resumed %v", err)
			continue
		}
		if err := client.Barrier(ctx, 10*time.Second); err != nil {
			logf("barrier-err resumed %s: %v", it.Session, err)
			continue
		}
		logf("acked resumed %s %s", it.Session, turn)
	}
	logf("took-done %d", len(items))
}

// fdspam sends n datagrams each carrying 8 fds: supervise must close them
// all and keep its fd count flat.
func fdspam(n int) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0) // no SOCK_CLOEXEC on macOS
	if err != nil {
		logf("error %v", err)
		return
	}
	defer syscall.Close(fd)
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	fds := make([]int, 8)
	for i := range fds {
		fds[i] = int(devnull.Fd())
	}
	to := &syscall.SockaddrUnix{Name: os.Getenv("NOTIFY_SOCKET")}
	for i := 0; i < n; i++ {
		if err := syscall.Sendmsg(fd, []byte("STATUS=spam"), syscall.UnixRights(fds...), to, 0); err != nil {
			logf("fdspam-err %v", err)
			return
		}
	}
}

// conn dials the notify socket once, for bursts of raw datagrams.
func conn() (*net.UnixConn, error) {
	return net.DialUnix("unixgram", nil, &net.UnixAddr{Name: os.Getenv("NOTIFY_SOCKET"), Net: "unixgram"})
}

func burst(n int) (sent, failed int) {
	c, err := conn()
	if err != nil {
		return 0, n
	}
	defer c.Close()
	msg := []byte("WATCHDOG=1")
	for i := 0; i < n; i++ {
		c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := c.Write(msg); err != nil {
			failed++
			continue
		}
		sent++
	}
	return sent, failed
}

// badinput sends one datagram of every malformed class the notify socket
// must survive (reliability.md 5 D).
func badinput() {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0) // no SOCK_CLOEXEC on macOS
	if err != nil {
		logf("error %v", err)
		return
	}
	defer syscall.Close(fd)
	to := &syscall.SockaddrUnix{Name: os.Getenv("NOTIFY_SOCKET")}
	send := func(payload []byte, fds ...int) {
		var oob []byte
		if len(fds) > 0 {
			oob = syscall.UnixRights(fds...)
		}
		if err := syscall.Sendmsg(fd, payload, oob, to, 0); err != nil && !errors.Is(err, syscall.EMSGSIZE) {
			logf("badinput-send-err %v", err)
		}
	}
	big := []byte("X_SUPERVISE_SESSION=evil\nX_SUPERVISE_EVENT=turn-end\nX_SUPERVISE_OUTCOME=completed\n")
	big = append(big, make([]byte, 64<<10)...)
	for _, p := range [][]byte{
		{},                                     // empty (CVE-2016-7796)
		big[:4097],                             // oversized: truncated, never a prefix
		big,                                    // 64 KiB
		[]byte("READY=1\x00MAINPID=1"),         // embedded NUL
		[]byte("STATUS=\xff\xfe"),              // invalid UTF-8
		[]byte("NOEQUALS"),                     // no '='
		[]byte("=value"),                       // empty key
		[]byte("X_SUPERVISE_EVENT=turn-begin"), // event without session
		[]byte("X_SUPERVISE_SESSION=s\nX_SUPERVISE_EVENT=bogus"),       // unknown event
		[]byte("X_SUPERVISE_SESSION=s\nX_SUPERVISE_SESSION=t"),         // duplicate private key
		[]byte("X_SUPERVISE_SESSION=a\x01b\nX_SUPERVISE_EVENT=closed"), // control char in id
		[]byte("WATCHDOG_USEC=0"),                                      // absurd watchdog
		[]byte("WATCHDOG_USEC=99999999999999999999999"),
		[]byte("WATCHDOG_USEC=-1"),
		[]byte("EXTEND_TIMEOUT_USEC=18446744073709551615"),
		[]byte("MAINPID=1"),                            // never honoured
		[]byte("READY=0\nFDSTORE=1\nX_OTHER_VENDOR=1"), // unknown keys: ignored
		[]byte("STATUS=line\r\nREADY=1\r"),             // CRLF
		[]byte(strings.Repeat("A=1\n", 1000)),
	} {
		send(p)
	}
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	null := int(devnull.Fd())
	send([]byte("READY=1"), null)            // fds on a non-barrier message: closed
	send([]byte("BARRIER=1"))                // barrier without fd
	send([]byte("BARRIER=1"), fd, null)      // barrier with two fds
	send([]byte("BARRIER=1\nREADY=1"), null) // barrier mixed with other keys
	many := make([]int, 200)
	for i := range many {
		many[i] = null
	}
	send([]byte("STATUS=fd spam"), many...)
	// The socket queue holds only a few datagrams (net.unix.max_dgram_qlen):
	// sends above blocked until supervise read the earlier ones.
}
