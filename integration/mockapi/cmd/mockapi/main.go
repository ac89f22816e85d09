// Command mockapi runs one mock API in the foreground and logs every request:
// a tool for finding out what a CLI sends. Not used by the tests.
//
//	go run ./integration/mockapi/cmd/mockapi -api openai -reply tool
//
// prints the base URL to point the CLI at, then logs each request on stderr
// until interrupted.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

func main() {
	reply := flag.String("reply", "text", "text|tool|stall|error|limit|pings")
	api := flag.String("api", "anthropic", "anthropic|openai|gemini")
	flag.Parse()
	script := func(r mockapi.Request) mockapi.Reply {
		fmt.Fprintf(os.Stderr, "#%d %s %s %s agent=%v session=%q first=%q last=%q toolresult=%v\n  headers=%v\n  body=%s\n",
			r.N, r.Time.Format("15:04:05.000"), r.Method, r.Path, r.Agent, r.Session, r.FirstUser, r.LastUser, r.ToolResult, r.Header, r.Body)
		switch *reply {
		case "tool":
			if r.Agent && !r.ToolResult {
				return mockapi.Reply{Kind: mockapi.Tool, Command: "echo hi"}
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
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
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
