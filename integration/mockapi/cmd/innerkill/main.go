//go:build linux

// Command innerkill reproduces what a wrapper CLI does with a signal death
// of its inner process, and what its parent can learn of it: it runs the
// pinned Gemini CLI headless (which re-spawns itself: an outer node that
// waits for an inner one) against a mock that stalls the model's answer,
// as a child subreaper like supervise, finds the inner process, holds a
// pidfd on it, kills it with SIGKILL, and reports the outer's exit, the
// wrapper's words, whether the inner became its child, what waitid on the
// pidfd says, and the inner's wait status from PIDFD_GET_INFO (Linux 6.15's
// PIDFD_INFO_EXIT). A tool for measuring, not used by the tests.
//
//	go run ./integration/mockapi/cmd/innerkill [-outer]
//
// With -outer it kills the wrapper instead, and reports that the inner,
// orphaned, became its child (the subreaper's), with its wait status.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// pidfdInfo is struct pidfd_info of linux/pidfd.h (6.15, version 0: 64 bytes).
type pidfdInfo struct {
	Mask, CgroupID                                                    uint64
	PID, TGID, PPID, RUID, RGID, EUID, EGID, SUID, SGID, FSUID, FSGID uint32
	ExitCode                                                          int32
}

const (
	pidfdInfoExit = 1 << 3
	pidfdGetInfo  = 0xC040FF0B // _IOWR(0xFF, 11, struct pidfd_info)
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "innerkill:", err)
		os.Exit(1)
	}
}

func run() error {
	outerKill := flag.Bool("outer", false, "kill the wrapper, not the inner process")
	flag.Parse()
	bin, _ := filepath.Abs("integration/realcli/node_modules/.bin")
	dir, _ := os.MkdirTemp("", "innerkill")
	defer os.RemoveAll(dir)
	home, proj := filepath.Join(dir, "home"), filepath.Join(dir, "project")
	os.MkdirAll(filepath.Join(home, ".gemini"), 0o700)
	os.MkdirAll(proj, 0o700)
	agent := make(chan struct{}, 16)
	api := mockapi.Gemini(func(r mockapi.Request) mockapi.Reply {
		if r.Agent {
			agent <- struct{}{}
			return mockapi.Reply{Kind: mockapi.Stall}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "ok"}
	})
	defer api.Close()
	settings, _ := json.Marshal(map[string]any{
		"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":  map[string]any{"usageStatisticsEnabled": false}, "telemetry": map[string]any{"enabled": false}})
	os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), settings, 0o600)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(bin, "gemini"), "-p", "Say hello.")
	cmd.Dir = proj
	cmd.Env = []string{"HOME=" + home, "PATH=" + bin + ":" + os.Getenv("PATH"), "TERM=dumb", "NO_COLOR=1",
		"NO_PROXY=127.0.0.1,localhost", "GEMINI_API_KEY=mock", "GOOGLE_GEMINI_BASE_URL=" + api.URL(),
		"GEMINI_CLI_TRUST_WORKSPACE=true", "TMPDIR=" + dir}
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	cmd.WaitDelay = 2 * time.Second // an orphaned inner holds the output pipe
	if err := cmd.Start(); err != nil {
		return err
	}
	outer := cmd.Process.Pid
	select {
	case <-agent:
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		return fmt.Errorf("no model request; output:\n%s", stderr.Bytes())
	}
	kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", outer, outer))
	f := strings.Fields(string(kids))
	if len(f) != 1 {
		return fmt.Errorf("outer %d has children %q, want one inner", outer, kids)
	}
	inner, _ := strconv.Atoi(f[0])
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", inner))
	fmt.Printf("outer pid %d (gemini wrapper), inner pid %d: %q\n", outer, inner, strings.ReplaceAll(string(comm), "\x00", " "))
	pfd, err := unix.PidfdOpen(inner, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open(%d): %v", inner, err)
	}
	t0 := time.Now()
	if *outerKill {
		if err := unix.Kill(outer, syscall.SIGKILL); err != nil {
			return err
		}
		err = cmd.Wait()
		fmt.Printf("outer killed: %v\n", err)
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", inner))
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		fmt.Printf("inner %d's parent now %s (we are %d)\n", inner, f[1], os.Getpid())
		unix.Kill(inner, syscall.SIGKILL)
		var ws unix.WaitStatus
		_, werr := unix.Wait4(inner, &ws, 0, nil)
		fmt.Printf("wait4(inner): %v, signaled %v signal %v\n", werr, ws.Signaled(), ws.Signal())
		return nil
	}
	if err := unix.Kill(inner, syscall.SIGKILL); err != nil {
		return err
	}
	err = cmd.Wait()
	fmt.Printf("outer exited after %v: %v (exit code %d)\n", time.Since(t0).Round(time.Millisecond), err, cmd.ProcessState.ExitCode())
	fmt.Printf("outer's output, last 400 bytes:\n%s\n", tailOf(stderr.Bytes(), 400))
	var ws unix.WaitStatus
	_, werr := unix.Wait4(inner, &ws, unix.WNOHANG, nil)
	fmt.Printf("wait4(inner) as its subreaper: %v (the wrapper reaped it: it never became our child)\n", werr)
	var si unix.Siginfo
	werr = unix.Waitid(unix.P_PIDFD, pfd, &si, unix.WEXITED|unix.WNOHANG, nil)
	fmt.Printf("waitid(P_PIDFD, inner): %v (a pidfd waits only for one's own child)\n", werr)
	var info pidfdInfo
	info.Mask = pidfdInfoExit
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(pfd), pidfdGetInfo, uintptr(unsafe.Pointer(&info)))
	if errno != 0 {
		fmt.Printf("PIDFD_GET_INFO: %v\n", errno)
		return nil
	}
	st := unix.WaitStatus(info.ExitCode)
	fmt.Printf("PIDFD_GET_INFO mask %#x: exit_code %#x: signaled %v signal %v exited %v code %d\n",
		info.Mask, info.ExitCode, st.Signaled(), st.Signal(), st.Exited(), st.ExitStatus())
	return nil
}

func tailOf(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
