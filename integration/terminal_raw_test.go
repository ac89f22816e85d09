//go:build linux

package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/supervise-dev/supervise/integration/mockapi"
	"github.com/supervise-dev/supervise/internal/tty"
)

// The terminal an interactive agent shares with supervise, read byte for
// byte from the master side of a pty (issue 44, item 4): supervise is the
// session leader of the pty as a person's shell would start it, the test
// agent draws on it, is killed, and the next run draws again.

// ptyRun is supervise run in its own session on a new pty; raw collects
// what the terminal was sent, once read is called.
type ptyRun struct {
	t      *testing.T
	master *os.File
	slave  *os.File
	cmd    *exec.Cmd

	mu  sync.Mutex
	raw bytes.Buffer
}

func startPTY(t *testing.T, e *env, args ...string) *ptyRun {
	t.Helper()
	m, s, err := tty.OpenPTY()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	// A person's terminal: 80x24.
	unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80})
	cmd := exec.Command(superviseBin, args...)
	cmd.Env = append(os.Environ(), e.vars...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &ptyRun{t: t, master: m, slave: s, cmd: cmd}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		m.Close()
		s.Close()
		if t.Failed() {
			t.Logf("the terminal got:\n%q", lastBytes(p.written(), 3000))
		}
	})
	return p
}

// read copies what the terminal is sent into raw, from now on.
func (p *ptyRun) read() {
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := p.master.Read(buf)
			p.mu.Lock()
			p.raw.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
}

func (p *ptyRun) written() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

func (p *ptyRun) waitRaw(what, want string) string {
	p.t.Helper()
	var s string
	waitFor(p.t, 30*time.Second, what, func() bool {
		s = p.written()
		return strings.Contains(s, want)
	})
	return s
}

// After a kill -9 of an agent that left the terminal raw, in the
// alternate screen with the cursor hidden and mouse and paste modes on:
// before the next run draws, supervise put back the terminal's settings
// as at its start, turned the modes off and cleared the screen, and its
// line says what happened between the clear and the next run's first
// bytes.
func TestTerminalRawRestoredAndClearedAfterKill(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=sh stty raw -echo </dev/tty; sh printf '\\033[?1049h\\033[?25l\\033[?1000h\\033[?2004hRUN1-FRAME'; turn-begin s1 t1; barrier; hang",
		"TESTAGENT_SCRIPT_2=sh printf RUN2-FIRST; hang")
	p := startPTY(t, e, "run", "--resume-exec", agentBin+" -r {session} {message}", "--", agentBin)
	p.read()
	want, err := unix.IoctlGetTermios(int(p.slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	run1 := e.waitEvent(1, "barrier-ok")
	p.waitRaw("run 1's frame", "RUN1-FRAME")
	if got, _ := unix.IoctlGetTermios(int(p.slave.Fd()), unix.TCGETS); got.Lflag&unix.ICANON != 0 {
		t.Fatal("the agent did not set the terminal raw: the test proves nothing")
	}
	syscall.Kill(run1.pid, syscall.SIGKILL)
	e.waitEvent(2, "sh-ok")
	raw := p.waitRaw("run 2's first bytes", "RUN2-FIRST")
	got, err := unix.IoctlGetTermios(int(p.slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if got.Iflag != want.Iflag || got.Oflag != want.Oflag || got.Lflag != want.Lflag || got.Cflag != want.Cflag || got.Cc != want.Cc {
		t.Errorf("the terminal's settings when run 2 drew = %+v, want them as at supervise's start %+v", *got, *want)
	}
	between := raw[strings.Index(raw, "RUN1-FRAME"):strings.Index(raw, "RUN2-FIRST")]
	clear := strings.LastIndex(between, tty.ClearSeq)
	if clear < 0 {
		t.Fatalf("no clear-screen sequence between the kill and run 2's first bytes: %q", between)
	}
	for _, mode := range []string{"\x1b[?1049l", "\x1b[?25h", "\x1b[?1000l", "\x1b[?2004l"} {
		if !strings.Contains(between[:clear], mode) {
			t.Errorf("the mode reset %q is not sent before the clear: %q", mode, between)
		}
	}
	line := "supervise: testagent was killed (SIGKILL) mid-turn; continuing session s1"
	if !strings.Contains(between[clear:], line) {
		t.Errorf("the line %q is not between the clear and run 2's first bytes: %q", line, between)
	}
}

// An agent that stops the terminal's output (tcflow TCOOFF, as ^S does)
// and dies mid-turn is relaunched while the terminal still takes no byte:
// the agent first filled what the pty buffers (so output stays stopped
// even after supervise restarts the flow between runs, as a terminal
// nobody reads does), and the test reads nothing from the pty until run
// 2's pid is in `supervise status`. Once the terminal is read again,
// supervise's line between the runs arrives. Before the Writer, supervise
// froze on its line and its last resort exited 1 after 60 s.
func TestTerminalStoppedOutputNeverHoldsRelaunch(t *testing.T) {
	e := newEnv(t)
	// Fill the pty through a descriptor of its own (O_NONBLOCK on the
	// shared one would reach supervise's too) until it takes no byte, then
	// stop output as ^S does.
	fill := filepath.Join(e.dir, "fill.py")
	writeFile(t, fill, `import os, termios, time
fd = os.open("/dev/tty", os.O_WRONLY | os.O_NONBLOCK)
# The kernel moves what the pty holds on towards its reader's buffer in
# the background, freeing room: fill again until a round finds none.
while True:
    n = 0
    for size in (4096, 256, 1):
        while True:
            try:
                n += os.write(fd, b"x" * size)
            except BlockingIOError:
                break
    if n == 0:
        break
    time.sleep(0.1)
termios.tcflow(fd, termios.TCOOFF)
`)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; sh python3 "+fill+"; log stopped; hang",
		"TESTAGENT_SCRIPT_2=log two; hang")
	p := startPTY(t, e, "run", "--resume-exec", agentBin+" -r {session} {message}", "--", agentBin)
	run1 := e.waitLog(1, "stopped")
	// A write to the terminal now blocks.
	probe := make(chan struct{})
	go func() { p.slave.Write([]byte{'.'}); close(probe) }()
	select {
	case <-probe:
		t.Fatal("the terminal still takes output: the test proves nothing")
	case <-time.After(200 * time.Millisecond):
	}
	syscall.Kill(run1.pid, syscall.SIGKILL)
	waitFor(t, 30*time.Second, "run 2's pid in supervise status while the terminal takes no output", func() bool {
		// A supervise frozen on the terminal may not answer status at
		// all: not yet, rather than a failure of its own.
		out, err := exec.Command(superviseBin, "status", "--json", "--state-dir", e.stateDir).Output()
		var st status
		if err != nil || json.Unmarshal(out, &st) != nil {
			return false
		}
		return st.Child.Run == 2 && st.Child.PID != 0 && st.Child.PID != run1.pid
	})
	e.waitLog(2, "two")
	select {
	case <-probe:
		t.Fatal("the terminal took output before the test read it: the relaunch was not proven under a stopped terminal")
	default:
	}
	// The terminal is read again: the line between the runs arrives.
	p.read()
	p.waitRaw("the line between the runs", "supervise: testagent was killed (SIGKILL) mid-turn; continuing session s1")
}

// The real CLIs in a real terminal (tmux), kill -9 mid-tool under the
// documented interactive setup: the screen is cleared before the relaunched
// CLI draws (the clear, then supervise's line, in the raw stream, before
// any byte of the next run), and once the CLI answered the continuation
// what happened is still on the screen. What stays there differs by CLI
// (measured with Claude Code 2.1.197, Codex 0.171.0 and Gemini CLI 0.61.0):
//   - Claude Code draws inline below the line: the line stays on the
//     visible screen.
//   - Codex draws its whole session in the alternate screen: the line is on
//     the main screen under it (back once Codex exits), never erased.
//   - Gemini CLI, resuming, clears the screen and the scrollback
//     (ESC[2J ESC[3J) after its first frame: no byte written before the
//     relaunch survives that.
//
// For all three the CLI's own transcript then shows the continuation
// supervise sent ("[supervise: automatic continuation] ... the agent was
// killed by signal 9 (SIGKILL), while the tool ... was running"), which
// says what happened inside the CLI's screen.
func TestTerminalRealCLILineAfterRelaunch(t *testing.T) {
	for _, c := range []struct {
		name, agent, template, ready, tool string
		env                                func(*testing.T) *realEnv
	}{
		{"claude", "claude", interactiveClaude, claudeReady, "Bash", interactiveClaudeEnv},
		{"codex", "codex", interactiveCodex, "? for shortcuts", "Bash", func(t *testing.T) *realEnv {
			r := newRealEnv(t, codexCLI())
			p := filepath.Join(r.home, ".codex", "config.toml")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, p, "approval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n"+string(b))
			return r
		}},
		{"gemini", "gemini", interactiveGemini, "Type your message", "run_shell_command", func(t *testing.T) *realEnv { return newRealEnv(t, geminiCLI()) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := c.env(t)
			const answer = "Checked: the parser is renamed."
			r.answer(func(q mockapi.Request) mockapi.Reply {
				switch {
				case !q.Agent:
					return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
				case continuation(q):
					return mockapi.Reply{Kind: mockapi.Text, Text: answer}
				case !q.ToolResult:
					return mockapi.Reply{Kind: mockapi.Tool, Command: "sleep 600"}
				}
				return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
			})
			tt := newTTY(r)
			w := tt.start("--resume-exec", c.template, "--", c.agent)
			tt.waitScreen(w, c.agent+"'s prompt", c.ready)
			tt.typeLine(w, realPrompt)
			session, pid := r.waitSession("in_turn", "tool")
			if r.cli.transcript != nil {
				waitFor(t, 60*time.Second, "the tool call in claude's transcript", func() bool {
					m, _ := filepath.Glob(filepath.Join(r.home, ".claude", "projects", "*", session+".jsonl"))
					for _, p := range m {
						if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "sleep 600") {
							return true
						}
					}
					return false
				})
			}
			syscall.Kill(pid, syscall.SIGKILL)
			screen := tt.waitScreen(w, c.agent+"'s answer to the continuation", answer)
			line := "supervise: " + c.agent + " was killed (SIGKILL) mid-tool (" + c.tool + "); continuing session " + session
			raw := tt.written()
			if d := os.Getenv("SUPERVISE_TEST_RAW_DIR"); d != "" { // to measure a new CLI version: its raw stream kept
				os.WriteFile(filepath.Join(d, c.agent+".raw"), []byte(raw), 0o600)
			}
			if !strings.Contains(raw, tty.ClearSeq+line) {
				t.Errorf("the raw stream lacks the clear and then the line %q", line)
			}
			visible := tt.tmux("capture-pane", "-p", "-J", "-t", w)
			after := raw[strings.Index(raw, line):]
			t.Logf("%s: the line on the visible screen after the answer: %v; in the pane or its scrollback: %v; after the line the CLI entered the alternate screen: %v, cleared the scrollback: %v",
				c.agent, strings.Contains(visible, line), strings.Contains(screen, line),
				strings.Contains(after, "\x1b[?1049h"), strings.Contains(after, "\x1b[3J"))
			const said = "[supervise: automatic continuation] Your previous turn in this session was interrupted: the agent was killed by signal 9 (SIGKILL)"
			if !strings.Contains(screen, said) {
				t.Errorf("after %s answered, its screen does not show the continuation %q:\n%s", c.agent, said, screen)
			}
			switch c.agent {
			case "claude":
				if !strings.Contains(visible, line) {
					t.Errorf("after claude answered the continuation, the line between the runs is not on the screen:\n%s", visible)
				}
			case "codex":
				// Codex draws in the alternate screen: the line must be on the
				// main screen before Codex switches, and nothing clears it.
				if alt := strings.Index(after, "\x1b[?1049h"); alt < 0 || strings.Contains(after[:alt], "\x1b[2J") || strings.Contains(after, "\x1b[3J") {
					t.Errorf("codex no longer keeps the main screen (alternate screen at %d): the measurement in docs/interactive.md is stale", alt)
				}
			}
		})
	}
}
