// Command fakecli stands in for Claude Code, Codex CLI, Gemini CLI and
// hermes in the adapter tests. It plays the product named by the base name
// it runs as (claude, codex, gemini, hermes) as far as supervise can see: how
// it is invoked, how it starts and resumes a session by explicit id (scoped
// to the working directory, as the real ones are), and which hooks it runs,
// when, with which JSON payload, read from the product's own configuration
// file under $HOME, where the test installs the shipped example. It does no
// AI work.
//
// Environment:
//
//	TESTAGENT_LOG     the log, in the test agent's format: run=N pid=P KIND ARG
//	SUPERVISE_RUN     the run number supervise gives every child
//	FAKECLI_HANG_RUN  in this run, hang inside the turn's tool call (to be killed)
//	FAKECLI_HANG_START_RUN  in this run, hang at start: before any hook (so
//	                  before any marker) and any output, as a CLI stuck in
//	                  its startup does (claude-code #75613)
//	FAKECLI_SILENT_RUN  in this run, go silent mid-turn: after the turn's
//	                  prompt hook (the turn is open), before any tool, no
//	                  more hooks and no output until killed
//	FAKECLI_LIMIT_RUN in this run, end the turn as the real CLI does on a
//	                  usage limit: after the prompt hook, print its words
//	                  (recorded from the pinned CLI, see docs/limits.md) and
//	                  exit 1
//	FAKECLI_LIMIT_RESET  the limit's reset from now (a Go duration, default
//	                  90s), in the words: Codex's "try again at", Gemini's
//	                  "Please retry in", Claude Code's subscriber "resets"
//
// Log kinds: start (argv as JSON), session ID, resumed ID, hook EVENT,
// hook-failed, hook-blocked, hook-stdout, tool-running TOOL (then it hangs
// when asked to), done ID, refused REASON, hang-start, silent TURN, limit
// RESET (RFC 3339).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func main() {
	os.Exit(run(filepath.Base(os.Args[0]), os.Args[1:]))
}

// cli is one invocation of the product being played.
type cli struct {
	flavor  string
	cwd     string
	home    string
	session string
	resumed bool
	prompt  string
	turn    string
	hooks   map[string][]hookGroup
}

// hookGroup is one matcher group of a hooks configuration.
type hookGroup struct {
	Matcher string `json:"matcher"`
	Hooks   []struct {
		Type    string  `json:"type"`
		Command string  `json:"command"`
		Timeout float64 `json:"timeout"`
	} `json:"hooks"`
}

func run(flavor string, args []string) int {
	b, _ := json.Marshal(args)
	logf("start", "%s", b)
	if thisRun("FAKECLI_HANG_START_RUN") {
		logf("hang-start", "")
		hang()
	}
	c := &cli{flavor: flavor}
	c.cwd, _ = os.Getwd()
	c.home = os.Getenv("HOME")
	resumeID, prompt, err := c.parse(args)
	if err != nil {
		logf("refused", "%v", err)
		fmt.Fprintf(os.Stderr, "%s: %v\n", flavor, err)
		return 2
	}
	c.prompt = prompt
	if err := c.loadHooks(args); err != nil {
		logf("refused", "hooks: %v", err)
		fmt.Fprintf(os.Stderr, "%s: %v\n", flavor, err)
		return 1
	}
	if resumeID != "" {
		if _, err := os.Stat(c.transcript(resumeID)); err != nil {
			// As claude does from another directory: the lookup is
			// scoped to the working directory.
			logf("refused", "no conversation found with session ID %s in %s", resumeID, c.cwd)
			fmt.Fprintf(os.Stderr, "No conversation found with session ID: %s\n", resumeID)
			return 1
		}
		c.session, c.resumed = resumeID, true
		logf("resumed", "%s", resumeID)
	} else {
		c.session = c.newID()
	}
	logf("session", "%s", c.session)
	c.turn = "turn-" + randHex(4)
	c.record(prompt)
	c.runTurn()
	logf("done", "%s", c.session)
	return 0
}

// parse reads the product's command line: the session to resume (by
// explicit id only) and the prompt. "latest", a bare --resume and the
// pickers are refused, as an unattended run must never use them.
func (c *cli) parse(args []string) (resumeID, prompt string, err error) {
	next := func(i *int) (string, bool) {
		if *i+1 < len(args) && !strings.HasPrefix(args[*i+1], "-") {
			*i++
			return args[*i], true
		}
		return "", false
	}
	switch c.flavor {
	case "claude":
		printMode := false
		for i := 0; i < len(args); i++ {
			switch a := args[i]; a {
			case "-p", "--print":
				printMode = true
			case "-r", "--resume":
				id, ok := next(&i)
				if !ok {
					return "", "", errors.New("bare --resume opens the interactive session picker")
				}
				resumeID = id
			case "-c", "--continue":
				return "", "", errors.New("--continue resumes the most recent session in this directory, not a chosen one")
			default:
				if strings.HasPrefix(a, "-") {
					return "", "", fmt.Errorf("unknown flag %s", a)
				}
				prompt = a
			}
		}
		if !printMode {
			return "", "", errors.New("interactive mode needs a terminal; use -p")
		}
	case "codex":
		if len(args) < 2 || args[0] != "exec" {
			return "", "", errors.New("usage: codex exec PROMPT | codex exec resume SESSION_ID PROMPT")
		}
		if args[1] == "resume" {
			if len(args) != 4 || strings.HasPrefix(args[2], "-") {
				return "", "", errors.New("exec resume needs SESSION_ID PROMPT (--last picks the most recent session)")
			}
			return args[2], args[3], nil
		}
		prompt = args[1]
	case "gemini":
		for i := 0; i < len(args); i++ {
			switch args[i] {
			case "-p", "--prompt":
				p, ok := next(&i)
				if !ok {
					return "", "", errors.New("-p needs a prompt")
				}
				prompt = p
			case "-r", "--resume":
				id, ok := next(&i)
				if !ok || id == "latest" {
					return "", "", errors.New("bare --resume resumes the latest session, not a chosen one")
				}
				resumeID = id
			default:
				return "", "", fmt.Errorf("unexpected argument %s", args[i])
			}
		}
	case "hermes":
		for i := 0; i < len(args); i++ {
			switch args[i] {
			case "-z", "--oneshot":
				p, ok := next(&i)
				if !ok {
					return "", "", errors.New("-z needs a prompt")
				}
				prompt = p
			case "--resume":
				id, ok := next(&i)
				if !ok || id == "latest" {
					return "", "", errors.New("--resume needs an explicit session id")
				}
				resumeID = id
			case "--accept-hooks":
			case "-c", "--continue":
				return "", "", errors.New("--continue picks the latest session, not a chosen one")
			default:
				return "", "", fmt.Errorf("unexpected argument %s", args[i])
			}
		}
	default:
		return "", "", fmt.Errorf("fakecli cannot play %q", c.flavor)
	}
	if prompt == "" {
		return "", "", errors.New("no prompt")
	}
	return resumeID, prompt, nil
}

// newID mints a session id in the product's format.
func (c *cli) newID() string {
	if c.flavor == "hermes" {
		return time.Now().Format("20060102_150405") + "_" + randHex(3)
	}
	u := randHex(16)
	return u[0:8] + "-" + u[8:12] + "-" + u[12:16] + "-" + u[16:20] + "-" + u[20:32]
}

// transcript is where a session of this working directory lives.
func (c *cli) transcript(id string) string {
	munged := regexp.MustCompile(`[^a-zA-Z0-9]`).ReplaceAllString(c.cwd, "-")
	return filepath.Join(c.home, "."+c.flavor, "fakecli-sessions", munged, id+".jsonl")
}

func (c *cli) record(prompt string) {
	path := c.transcript(c.session)
	os.MkdirAll(filepath.Dir(path), 0o700)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	b, _ := json.Marshal(map[string]string{"role": "user", "content": prompt})
	f.Write(append(b, '\n'))
}

// loadHooks reads the hooks from the product's configuration under $HOME.
func (c *cli) loadHooks(args []string) error {
	c.hooks = map[string][]hookGroup{}
	var path string
	switch c.flavor {
	case "claude":
		path = filepath.Join(c.home, ".claude", "settings.json")
	case "gemini":
		path = filepath.Join(c.home, ".gemini", "settings.json")
	case "codex":
		cfg, err := os.ReadFile(filepath.Join(c.home, ".codex", "config.toml"))
		if err != nil || !codexHooksEnabled(string(cfg)) {
			logf("hooks-off", "[features] hooks = true is not set in ~/.codex/config.toml")
			return nil
		}
		path = filepath.Join(c.home, ".codex", "hooks.json")
	case "hermes":
		return c.loadHermesHooks(args)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var cfg struct {
		Hooks map[string][]hookGroup `json:"hooks"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	c.hooks = cfg.Hooks
	return nil
}

func codexHooksEnabled(toml string) bool {
	section := ""
	for _, line := range strings.Split(toml, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		// hooks, or its deprecated name codex_hooks (Codex 0.171 takes both).
		if key := strings.TrimSpace(k); ok && section == "[features]" && (key == "hooks" || key == "codex_hooks") &&
			strings.TrimSpace(v) == "true" {
			return true
		}
	}
	return false
}

// loadHermesHooks reads the hooks: block of ~/.hermes/config.yaml (the
// shape hermes documents: event, then a list of command/matcher/timeout
// entries), and hermes's consent rule for unattended runs.
func (c *cli) loadHermesHooks(args []string) error {
	b, err := os.ReadFile(filepath.Join(c.home, ".hermes", "config.yaml"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	accepted := os.Getenv("HERMES_ACCEPT_HOOKS") == "1"
	for _, a := range args {
		accepted = accepted || a == "--accept-hooks"
	}
	inHooks, event := false, ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if indent == 0 {
			inHooks = trimmed == "hooks:"
			if k, v, ok := strings.Cut(trimmed, ":"); ok && k == "hooks_auto_accept" && strings.TrimSpace(v) == "true" {
				accepted = true
			}
			continue
		}
		if !inHooks {
			continue
		}
		if indent == 2 && strings.HasSuffix(trimmed, ":") {
			event = strings.TrimSuffix(trimmed, ":")
			continue
		}
		item := strings.HasPrefix(trimmed, "- ")
		k, v, ok := strings.Cut(strings.TrimPrefix(trimmed, "- "), ":")
		if !ok || event == "" {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		groups := c.hooks[event]
		if item {
			groups = append(groups, hookGroup{})
			groups[len(groups)-1].Hooks = append(groups[len(groups)-1].Hooks, struct {
				Type    string  `json:"type"`
				Command string  `json:"command"`
				Timeout float64 `json:"timeout"`
			}{Type: "command"})
		}
		if len(groups) == 0 {
			continue
		}
		g := &groups[len(groups)-1]
		switch strings.TrimSpace(k) {
		case "command":
			g.Hooks[0].Command = v
		case "matcher":
			g.Matcher = v
		case "timeout":
			g.Hooks[0].Timeout, _ = strconv.ParseFloat(v, 64)
		}
		c.hooks[event] = groups
	}
	if !accepted && len(c.hooks) > 0 {
		logf("hooks-off", "shell hooks not accepted (--accept-hooks, HERMES_ACCEPT_HOOKS=1 or hooks_auto_accept: true)")
		c.hooks = nil
	}
	return sc.Err()
}

// runTurn plays one turn with one tool call, firing the product's hooks.
func (c *cli) runTurn() {
	const answer = "done: renamed it"
	source := "startup"
	if c.resumed {
		source = "resume"
	}
	switch c.flavor {
	case "claude":
		c.fire("SessionStart", "source", source)
		c.fire("UserPromptSubmit", "prompt", c.prompt)
		c.afterPrompt()
		c.fire("PreToolUse", "tool_name", "Bash", "tool_input", map[string]string{"command": "make test"}, "tool_use_id", "toolu_"+randHex(8))
		c.tool("Bash")
		c.fire("PostToolUse", "tool_name", "Bash", "tool_response", map[string]string{"stdout": "ok"})
		c.fire("Stop", "stop_hook_active", false)
		c.fire("SessionEnd", "reason", "other")
	case "codex":
		c.fire("SessionStart", "source", source)
		c.fire("UserPromptSubmit", "prompt", c.prompt, "turn_id", c.turn)
		c.afterPrompt()
		c.fire("PreToolUse", "tool_name", "Bash", "tool_input", map[string]string{"command": "make test"}, "turn_id", c.turn)
		c.tool("Bash")
		c.fire("PostToolUse", "tool_name", "Bash", "turn_id", c.turn)
		c.fire("Stop", "turn_id", c.turn, "stop_hook_active", false, "last_assistant_message", answer)
	case "gemini":
		c.fire("SessionStart", "source", source)
		c.fire("BeforeAgent", "prompt", c.prompt)
		c.afterPrompt()
		c.fire("BeforeTool", "tool_name", "run_shell_command", "tool_input", map[string]string{"command": "make test"})
		c.tool("run_shell_command")
		c.fire("AfterTool", "tool_name", "run_shell_command", "tool_response", map[string]string{"llmContent": "ok"})
		c.fire("AfterAgent", "prompt", c.prompt, "prompt_response", answer, "stop_hook_active", false)
		c.fire("SessionEnd", "reason", "exit")
	case "hermes":
		if !c.resumed {
			c.fire("on_session_start", "extra", map[string]any{"model": "m", "platform": "cli"})
		}
		c.fire("pre_llm_call", "extra", map[string]any{"user_message": c.prompt, "turn_id": c.turn, "is_first_turn": !c.resumed})
		c.afterPrompt()
		c.fire("pre_tool_call", "tool_name", "terminal", "tool_input", map[string]string{"command": "make test"},
			"extra", map[string]any{"turn_id": c.turn, "tool_call_id": "tc-" + randHex(4)})
		c.tool("terminal")
		c.fire("post_tool_call", "tool_name", "terminal", "tool_input", map[string]string{"command": "make test"},
			"extra", map[string]any{"turn_id": c.turn, "result": `{"output":"ok"}`})
		c.fire("post_llm_call", "extra", map[string]any{"user_message": c.prompt, "assistant_response": answer, "turn_id": c.turn})
		c.fire("on_session_end", "extra", map[string]any{"turn_id": c.turn, "completed": true, "failed": false,
			"interrupted": false, "turn_exit_reason": "text_response(finish_reason=stop)"})
	}
}

// tool runs the turn's tool call, or hangs in it when this run is to be
// killed there.
func (c *cli) tool(name string) {
	logf("tool-running", "%s", name)
	if thisRun("FAKECLI_HANG_RUN") {
		hang()
	}
}

// thisRun reports whether the variable names this run (SUPERVISE_RUN).
func thisRun(variable string) bool {
	run := os.Getenv("SUPERVISE_RUN")
	for _, v := range strings.Split(os.Getenv(variable), ",") {
		if v != "" && v == run {
			return true
		}
	}
	return false
}

// hang waits until killed (an empty select would be a deadlock the runtime
// exits on).
func hang() {
	for {
		time.Sleep(time.Hour)
	}
}

// afterPrompt is where a turn, open since its prompt hook, goes silent or
// meets a usage limit when this run is told to.
func (c *cli) afterPrompt() {
	if thisRun("FAKECLI_SILENT_RUN") {
		logf("silent", "%s", c.turn)
		hang()
	}
	if !thisRun("FAKECLI_LIMIT_RUN") {
		return
	}
	in := 90 * time.Second
	if d, err := time.ParseDuration(os.Getenv("FAKECLI_LIMIT_RESET")); err == nil && d > 0 {
		in = d
	}
	reset := time.Now().Add(in).Truncate(time.Second).Add(time.Second)
	logf("limit", "%s", reset.Format(time.RFC3339))
	switch c.flavor {
	case "claude":
		// A subscriber's words (with an API key Claude Code names no reset:
		// "API Error: Request rejected (429) · ..."), on stdout as -p
		// prints them.
		fmt.Printf("You've hit your session limit · resets %s (UTC)\n", claudeClock(reset.UTC()))
	case "codex":
		fmt.Fprintf(os.Stderr, "ERROR: You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), "+
			"visit https://chatgpt.com/settings/usage to purchase more credits or try again at %s.\n", codexClock(reset, time.Now()))
	case "gemini":
		fmt.Fprintf(os.Stderr, "Error when talking to Gemini API Full report available at: /tmp/gemini-client-error.json "+
			"TerminalQuotaError: You have exhausted your daily quota on this model.\n  cause: {\n    code: 429,\n"+
			"    message: 'You exceeded your current quota, please check your plan and billing details.\\n' +\n"+
			"      'Please retry in %.1fs.',\n  },\n}\nAn unexpected critical error occurred:[object Object]\n", time.Until(reset).Seconds())
	default:
		fmt.Fprintf(os.Stderr, "Error: usage limit reached; try again in %d seconds\n", int(time.Until(reset).Seconds()))
	}
	os.Exit(1)
}

// codexClock formats a reset as Codex 0.171 does: "4:41 AM" the same day,
// "Dec 2nd, 2026 4:41 AM" another.
func codexClock(t, now time.Time) string {
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("3:04 PM")
	}
	suffix := "th"
	switch d := t.Day(); {
	case d == 1 || d == 21 || d == 31:
		suffix = "st"
	case d == 2 || d == 22:
		suffix = "nd"
	case d == 3 || d == 23:
		suffix = "rd"
	}
	return t.Format("Jan 2") + suffix + t.Format(", 2006 3:04 PM")
}

// claudeClock formats a reset as Claude Code 2.1 does within a day:
// "3pm", "3:30pm".
func claudeClock(t time.Time) string {
	if t.Minute() == 0 {
		return strings.ToLower(t.Format("3PM"))
	}
	return strings.ToLower(t.Format("3:04PM"))
}

// fire runs the hooks configured for event with the product's payload:
// its common fields plus kv.
func (c *cli) fire(event string, kv ...any) {
	p := map[string]any{"session_id": c.session, "hook_event_name": event, "cwd": c.cwd}
	switch c.flavor {
	case "claude":
		p["transcript_path"], p["permission_mode"] = c.transcript(c.session), "default"
	case "codex":
		p["transcript_path"], p["model"] = c.transcript(c.session), "gpt-5-codex"
	case "gemini":
		p["transcript_path"], p["timestamp"] = c.transcript(c.session), time.Now().UTC().Format(time.RFC3339)
	case "hermes":
		p["tool_name"], p["tool_input"], p["profile"], p["extra"] = nil, nil, "default", map[string]any{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		p[kv[i].(string)] = kv[i+1]
	}
	payload, _ := json.Marshal(p)
	for _, g := range c.hooks[event] {
		if !c.matches(event, g.Matcher, p) {
			continue
		}
		for _, h := range g.Hooks {
			if h.Command == "" || (h.Type != "" && h.Type != "command") {
				continue
			}
			c.runHook(event, h.Command, h.Timeout, payload)
		}
	}
}

// matches applies a group's matcher: a regular expression on the tool for
// tool events, the exact source, reason or notification type for the
// others; "" and "*" match everything.
func (c *cli) matches(event, matcher string, p map[string]any) bool {
	if matcher == "" || matcher == "*" {
		return true
	}
	var subject string
	for _, k := range []string{"tool_name", "source", "reason", "notification_type"} {
		if s, ok := p[k].(string); ok {
			subject = s
			break
		}
	}
	if strings.Contains(event, "Tool") || strings.Contains(event, "tool") {
		re, err := regexp.Compile("^(?:" + matcher + ")$")
		return err == nil && re.MatchString(subject)
	}
	return matcher == subject
}

// runHook runs one hook command the way the product does: through the
// shell for claude, codex and gemini, split into words without a shell for
// hermes; the payload on stdin, the product's extra variables set.
func (c *cli) runHook(event, command string, timeout float64, payload []byte) {
	d := 60 * time.Second
	if timeout > 0 {
		d = time.Duration(timeout * float64(time.Second))
		if c.flavor == "gemini" {
			d = time.Duration(timeout) * time.Millisecond
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var cmd *exec.Cmd
	env := os.Environ()
	switch c.flavor {
	case "hermes":
		words := strings.Fields(command)
		cmd = exec.CommandContext(ctx, words[0], words[1:]...)
		env = append(env, "HERMES_HOME="+filepath.Join(c.home, ".hermes"))
	default:
		cmd = exec.CommandContext(ctx, "/bin/sh", "-c", command)
		env = append(env, "CLAUDE_PROJECT_DIR="+c.cwd)
		if c.flavor == "gemini" {
			env = append(env, "GEMINI_PROJECT_DIR="+c.cwd, "GEMINI_SESSION_ID="+c.session, "GEMINI_CWD="+c.cwd)
		}
	}
	cmd.Env, cmd.Dir = env, c.cwd
	cmd.Stdin = bytes.NewReader(payload)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	switch {
	case code == 2:
		logf("hook-blocked", "%s %q", event, stderr.String())
	case err != nil:
		logf("hook-failed", "%s %v %q", event, err, stderr.String())
	default:
		logf("hook", "%s", event)
	}
	if stdout.Len() > 0 {
		logf("hook-stdout", "%s %q", event, stdout.String())
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// logf appends one record to $TESTAGENT_LOG, framed as the test agent
// frames its own (a new line first, "\t$" last), so the reader can drop a
// record torn by a kill.
func logf(kind, format string, args ...any) {
	path := os.Getenv("TESTAGENT_LOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	arg := strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", `\n`)
	fmt.Fprintf(f, "\nrun=%s pid=%d %s %s\t$\n", os.Getenv("SUPERVISE_RUN"), os.Getpid(), kind, arg)
}
