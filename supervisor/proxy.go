package supervisor

import (
	"slices"
	"strings"
	"sync/atomic"

	"github.com/supervise-dev/supervise/apiproxy"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// With --api-proxy on, each run gets a model-API proxy of its own
// (package apiproxy): the agent's ANTHROPIC_BASE_URL, OPENAI_BASE_URL and
// GOOGLE_GEMINI_BASE_URL point at it, and what it derives from the
// traffic reaches the loop as machine.Traffic events. The proxy's sink
// never blocks: it queues the event, tagged with its run, or counts it
// dropped when the queue is full. The proxy closes at the death, before
// the loop drains the queue, so nothing of a dead run is taken for the
// next one's.

// proxyQueue bounds the events queued between the proxy and the loop.
const proxyQueue = 4096

// proxied is one event of the proxy of run.
type proxied struct {
	run uint64
	ev  apiproxy.Event
}

// proxyState is the runner's side of the API proxy.
type proxyState struct {
	c       chan proxied
	dropped atomic.Uint64
	p       *apiproxy.Proxy // the current run's, nil between runs
	// refusals is what refuseModelCall answers from, published by the loop
	// (publishRefusals); seen and hooked are what it was published from.
	refusals atomic.Pointer[refusals]
	seen     uint64
	hooked   string
}

// refusals is a snapshot of the sessions whose model calls are not
// forwarded (parked for their token budget), with the message each is
// answered with; total, when set, refuses every session (the state dir's
// budget is spent). Never changed once published.
type refusals struct {
	sessions map[string]string
	total    string
	// invented and hooked: the proxy's own name for traffic that names no
	// session is the session the agent's hooks named (Traffic.Invented).
	invented, hooked string
}

// publishRefusals publishes a new snapshot when what the machine refuses
// changed; loop goroutine only. Cheap when nothing changed.
func (s *Supervisor) publishRefusals() {
	if s.px.refusals.Load() != nil && s.m.RefusalsChanged == s.px.seen && s.m.Hooked() == s.px.hooked {
		return
	}
	s.px.seen, s.px.hooked = s.m.RefusalsChanged, s.m.Hooked()
	r := &refusals{sessions: map[string]string{}, invented: s.proxySession(), hooked: s.m.Hooked()}
	for _, id := range s.m.RefusedSessions() {
		r.sessions[id], _ = s.m.Refusal(id)
	}
	r.total = s.m.TotalRefusal()
	s.px.refusals.Store(r)
}

// refuseModelCall says whether the proxy must answer a model call of
// session itself instead of forwarding it, and with what message (naming
// the budget and the `supervise resume` command that lifts it). For the
// proxy's request goroutines: it reads only the published snapshot, never
// blocks, and is safe for concurrent use. Wired as apiproxy.Config.Refuse.
func (s *Supervisor) refuseModelCall(session string) (string, bool) {
	r := s.px.refusals.Load()
	if r == nil {
		return "", false
	}
	if session == r.invented && r.hooked != "" {
		session = r.hooked
	}
	if msg, ok := r.sessions[session]; ok {
		return msg, true
	}
	if r.total != "" {
		return r.total, true
	}
	return "", false
}

// proxyEnvKeys are the variables the proxy sets in the agent's environment.
var proxyEnvKeys = []string{"ANTHROPIC_BASE_URL=", "OPENAI_BASE_URL=", "GOOGLE_GEMINI_BASE_URL="}

// startProxy starts run's proxy and returns the agent's environment with
// its base URLs in place of supervise's own; env unchanged when the proxy
// is off or cannot start (said in the log: the agent then calls the API
// directly, and nothing of its traffic is seen).
func (s *Supervisor) startProxy(run uint64, env []string) []string {
	if !s.cfg.APIProxy {
		return env
	}
	c := s.px.c
	p, err := apiproxy.Start(apiproxy.Config{
		// Traffic that names no session (Gemini CLI with an API key) is
		// one session of this state dir, the same in every run, so a
		// resume launch (`gemini -r latest ...`) continues it.
		Session:     s.proxySession(),
		StreamStall: s.cfg.StreamStall,
		// A session over its token budget, or any once the state dir's is
		// spent, gets no more model calls: the proxy answers them itself.
		Refuse: s.refuseModelCall,
		UpstreamError: func(class string) {
			s.met.set.GetOrCreateCounter(`supervise_api_proxy_upstream_errors_total{class="` + class + `"}`).Inc()
		},
		Log: s.log.With("component", "api-proxy"),
		Sink: func(ev apiproxy.Event) {
			select {
			case c <- proxied{run: run, ev: ev}:
			default:
				s.px.dropped.Add(1)
			}
		},
	})
	if err != nil {
		s.log.Error("the model-API proxy cannot start: this run calls the API directly, unseen", "run", run, "err", err)
		return env
	}
	s.px.p = p
	out := env[:0:0]
	noProxy := map[string]string{"NO_PROXY": "", "no_proxy": ""}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := noProxy[k]; ok {
			noProxy[k] = v
			continue
		}
		if !hasAnyPrefix(kv, proxyEnvKeys) {
			out = append(out, kv)
		}
	}
	// An agent whose HTTP(S)_PROXY is set must not send the proxy's
	// requests to that proxy: 127.0.0.1 joins its NO_PROXY.
	for k, v := range noProxy {
		if !slices.Contains(strings.Split(v, ","), "127.0.0.1") {
			v = strings.TrimPrefix(v+",127.0.0.1", ",")
		}
		out = append(out, k+"="+v)
	}
	return append(out, p.Env()...)
}

// proxySession names the session of traffic that names none.
func (s *Supervisor) proxySession() string { return "proxy-" + s.id.treeID }

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// stopProxy closes the run's proxy and applies what it queued.
func (s *Supervisor) stopProxy() {
	if s.px.p == nil {
		return
	}
	s.px.p.Close()
	s.px.p = nil
	for {
		select {
		case x := <-s.px.c:
			s.traffic(x)
		default:
			return
		}
	}
}

// traffic hands one proxy event of the current run to the machine.
func (s *Supervisor) traffic(x proxied) {
	if n := s.px.dropped.Swap(0); n > 0 {
		s.log.Warn("the API proxy saw more than the loop could take in time: events dropped", "dropped", n)
		s.met.count(machine.Count{Metric: "proxy_dropped", N: int(n)})
	}
	if x.run != s.m.Run.Run || !s.m.Running() {
		return
	}
	ev := machine.Traffic{Session: x.ev.Session, Turn: x.ev.Turn, Tool: x.ev.Tool, Detail: x.ev.Detail,
		RetryAt: x.ev.RetryAt, Input: x.ev.Input, Output: x.ev.Output, Invented: x.ev.Session == s.proxySession()}
	switch x.ev.Kind {
	case apiproxy.TurnBegin:
		ev.Kind = machine.TrafficTurnBegin
	case apiproxy.Phase:
		ev.Kind = machine.TrafficTool
		if x.ev.Tool == "" {
			ev.Kind = machine.TrafficModel
		}
	case apiproxy.TurnEnd:
		ev.Kind, ev.Outcome = machine.TrafficTurnEnd, "completed"
	case apiproxy.Waiting:
		ev.Kind = machine.TrafficLimited
	case apiproxy.Usage:
		ev.Kind = machine.TrafficUsage
	case apiproxy.Stall:
		ev.Kind, ev.Stalled = machine.TrafficStall, s.cfg.StreamStall
	default:
		return
	}
	if !s.m.Held(ev.Session) {
		ev.Stored = s.stored(ev.Session)
	}
	s.step(ev)
}
