package integration

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Issue 46 B10: a same-uid fake control.sock in a state dir answers an
// endless JSON string. `supervise status` and `ls` read at most a bounded
// answer (supervisor.MaxStatusAnswer) and fail with a message; before, status
// grew to 1.59 GB in the 5 s of its deadline.
func TestHostileControlSocketBounded(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "hostile")
	// A state dir of a supervise that ran, then a socket in it that is not
	// a supervise's.
	if code, _, errs := superviseCmd(t, []string{"SUPERVISE_STATE_DIR="}, "run", "--restart", "never", "--state-dir", dir, "--", "true"); code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	os.Remove(filepath.Join(dir, "control.sock"))
	ln, err := net.Listen("unix", filepath.Join(dir, "control.sock"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("a", 64<<10))
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"name":"`))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	for _, args := range [][]string{{"status", "--state-dir", dir}, {"status", "--json", "--state-dir", dir}, {"ls", "--root", root}} {
		cmd := exec.Command(superviseBin, args...)
		cmd.Env = append(os.Environ(), "SUPERVISE_STATE_DIR=", "HOME="+root)
		out, _ := cmd.CombinedOutput()
		rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB
		t.Logf("supervise %s: exit %d, peak RSS %d MiB: %.300s", strings.Join(args, " "), cmd.ProcessState.ExitCode(), rss>>10, out)
		// A -race build keeps shadow memory several times the heap: the
		// bound is the plain build's (the pass without -race checks it).
		if rss > 300<<10 && !raceEnabled {
			t.Errorf("supervise %s: peak RSS %d MiB against an endless answer, want under 300", args[0], rss>>10)
		}
		if args[0] == "status" && cmd.ProcessState.ExitCode() == 0 {
			t.Errorf("supervise %s: exit 0 on an endless answer", strings.Join(args, " "))
		}
	}
}
