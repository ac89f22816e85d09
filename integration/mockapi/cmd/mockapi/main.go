// Command mockapi is a mock model API on 127.0.0.1: a tool for trying an
// agent CLI under supervise without an API key, and for finding out what a
// CLI sends. It serves one API (Anthropic Messages, OpenAI Responses or
// Gemini streamGenerateContent), prints the base URL to point the CLI at
// on stdout, logs each request on stderr, and runs until interrupted
// (Ctrl-C). It never sends anything anywhere: it only answers on loopback.
//
//	go run ./integration/mockapi/cmd/mockapi -api anthropic -reply tool
//
// Then, in another terminal, with the URL it printed:
//
//	ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=sk-ant-mock \
//	  supervise --api-proxy on -- claude -p 'say hi'
//
// -reply says what the model answers: text ("Done."), tool (asks once for
// the shell tool to run `echo hi`, then text), stall (a stream that stops
// sending), error (HTTP 400, which no CLI retries), limit (HTTP 429 with
// retry-after), pings (a stream of keep-alive pings only), usage (the
// provider's usage-limit answer until -reset from the start, then text),
// spent (a usage limit that names a reset -reset ahead and never lifts: a
// spent plan or a spend cap). README.md
// ("Trying an agent without an API key") has the settings for Codex and
// Gemini CLI too. The integration tests use the package
// (integration/mockapi), not this command.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

func main() {
	reply := flag.String("reply", "text", "what the model answers: text, tool (one shell tool call, then text), stall, error (400), limit (429), pings, usage (a usage limit until -reset, then text) or spent (a usage limit that never lifts)")
	reset := flag.Duration("reset", 90*time.Second, "with -reply usage: when the usage limit lifts, from the start; with -reply spent: the reset each answer names")
	api := flag.String("api", "anthropic", "the API served: anthropic (Messages), openai (Responses) or gemini (streamGenerateContent)")
	holdEnd := flag.Bool("hold-end", false, "hold the agent loop's text and tool answers open after their final event until the client leaves (the CLI has its whole answer before the stream ends)")
	flag.Parse()
	text := func(r mockapi.Request) mockapi.Reply {
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done.", HoldEnd: *holdEnd && r.Agent}
	}
	var limited func(mockapi.Request) mockapi.Reply
	switch *reply {
	case "usage":
		limited = mockapi.Until(time.Now().Add(*reset), text)
	case "spent":
		limited = mockapi.NeverLifts(*reset)
	}
	script := func(r mockapi.Request) mockapi.Reply {
		fmt.Fprintf(os.Stderr, "#%d %s %s %s agent=%v session=%q first=%q last=%q toolresult=%v\n  headers=%v\n  body=%s\n",
			r.N, r.Time.Format("15:04:05.000"), r.Method, r.Path, r.Agent, r.Session, r.FirstUser, r.LastUser, r.ToolResult, r.Header, r.Body)
		switch *reply {
		case "tool":
			if r.Agent && !r.ToolResult {
				return mockapi.Reply{Kind: mockapi.Tool, Command: "echo hi", HoldEnd: *holdEnd}
			}
		case "stall":
			if r.Agent {
				return mockapi.Reply{Kind: mockapi.Stall}
			}
		case "error":
			return mockapi.Reply{Kind: mockapi.Error}
		case "limit":
			if r.Agent {
				return mockapi.Reply{Kind: mockapi.Limit}
			}
		case "pings":
			if r.Agent {
				return mockapi.Reply{Kind: mockapi.Pings}
			}
		case "usage", "spent":
			return limited(r)
		}
		return text(r)
	}
	s := map[string]func(func(mockapi.Request) mockapi.Reply) *mockapi.Server{
		"anthropic": mockapi.Anthropic, "openai": mockapi.OpenAI, "gemini": mockapi.Gemini}[*api](script)
	fmt.Println(s.URL())
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt)
	<-c
	fmt.Fprintln(os.Stderr, "other:", s.Other())
	s.Close()
}
