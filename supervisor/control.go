package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/resume"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

var osGetpid = os.Getpid

// request is a control request served on the loop goroutine.
type request struct {
	kind    string // "status"
	session string
	reply   chan response
}

type response struct {
	status   statusSnap
	delivery string
	err      error
}

// serve answers one control request; it runs on the loop goroutine.
func (s *Supervisor) serve(req request) {
	var resp response
	switch req.kind {
	case "status":
		resp.status, resp.err = s.status()
	case "resume":
		resp.delivery, resp.err = s.manualResume(req.session)
	case "stop":
		// As a SIGTERM to this supervise: the graceful stop, exit 0.
		s.step(machine.StopRequested{Signal: int(syscall.SIGTERM), Name: "supervise stop"})
		resp.delivery = s.cfg.StopTimeout.String()
	case "restart":
		s.run.reply = nil
		s.step(machine.RestartRequested{})
		if s.run.reply != nil {
			resp.err = s.run.reply.Err
		}
	default:
		resp.err = fmt.Errorf("unknown request %q", req.kind)
	}
	req.reply <- resp
}

// Control serves the control socket: a small HTTP API on a unix socket in
// the state dir (mode 0600, inside the 0700 state dir), so status works while
// the supervisor holds the journal lock.
//
//	GET  /status[?all=1|?session=ID]  the Status JSON (all: every session, streamed)
//	POST /resume?session=ID   resume a parked, stopped or pending session
//	POST /stop                the graceful stop a SIGTERM gives (exit 0)
//	POST /restart             stop the run and relaunch at once, its turns resumed
type Control struct {
	ln   net.Listener
	srv  *http.Server
	path string
}

// ListenControl binds the control socket at path, replacing a stale socket
// file. The caller must hold the journal lock first: that lock, not the
// socket, decides which supervise owns the state dir.
func ListenControl(path string, s *Supervisor) (*Control, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			// Never removed or followed: it is not ours.
			return nil, fmt.Errorf("control socket: %s exists and is not a socket (a %s); remove it", path, fi.Mode().Type())
		}
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	// bind created the socket file itself (it fails on any existing name,
	// links included); chmod it only if it is still a socket.
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == os.ModeSocket {
		os.Chmod(path, 0o600)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		resp, err := s.ask(ctx, request{kind: "status"})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		// Listed off the loop, streamed for ?all=1: any size.
		v := View{All: r.URL.Query().Get("all") == "1", Session: r.URL.Query().Get("session")}
		snap := resp.status
		if v.Session != "" {
			if err := snap.collect(s.db, v); err != nil {
				code := http.StatusServiceUnavailable
				if errors.Is(err, ErrUnknownSession) {
					code = http.StatusNotFound
				}
				http.Error(w, err.Error(), code)
				return
			}
			v = View{}
			w.Header().Set("Content-Type", "application/json")
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			enc.Encode(snap.st)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		snap.writeJSON(w, s.db, v)
	})
	// Found at the first resume asked, not at every start: it reads
	// /proc/self/cgroup and /proc/self/mountinfo (0.1 to 0.3 ms).
	agentCgroup := sync.OnceValue(func() string {
		if s.cfg.NoCgroups {
			return ""
		}
		return child.AgentCgroupDir(s.cfg.Name, s.id.treeID)
	})
	mux.HandleFunc("POST /resume", s.serveResume(agentCgroup))
	mux.HandleFunc("POST /stop", s.serveOp("stop", agentCgroup))
	mux.HandleFunc("POST /restart", s.serveOp("restart", agentCgroup))
	c := &Control{ln: peerListener{ln}, path: path, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if pc, ok := c.(*peerConn); ok {
				return context.WithValue(ctx, peerKey{}, pc.peer)
			}
			return ctx
		}}}
	return c, nil
}

// fromOutside reports whether the sender of r is shown to be outside the
// agent's tree (peerOrigin); otherwise it answers 403 and logs why. The
// agent is not trusted to lift its own park, nor to stop or restart
// itself through supervise: a person does. A sender that cannot be shown
// to be outside its tree is refused too (fail closed).
func (s *Supervisor) fromOutside(w http.ResponseWriter, r *http.Request, op string, agentCgroup func() string) bool {
	peer, _ := r.Context().Value(peerKey{}).(*child.Peer)
	o, why := s.peerOrigin(peer, agentCgroup())
	if o == child.OriginOutside || o == child.OriginUnchecked {
		return true
	}
	pid := 0
	if peer != nil {
		pid = peer.PID()
	}
	session := r.URL.Query().Get("session")
	if o == child.OriginTree {
		s.log.Warn("control: refused a "+op+" asked from inside the agent's tree", "pid", pid,
			"session", session, "why", why)
		http.Error(w, fmt.Sprintf("refused: supervise %s was run from inside the agent's process tree (%s); "+
			"a person %s, not the agent", op, why, map[string]string{"resume": "resumes a parked session",
			"stop": "stops it", "restart": "restarts it"}[op]), http.StatusForbidden)
		return false
	}
	s.log.Warn("control: refused a "+op+" whose sender cannot be shown to be outside the agent's tree", "pid", pid,
		"session", session, "why", why)
	http.Error(w, fmt.Sprintf("refused: the process that asked for this %s cannot be shown to be outside the agent's process tree (%s); "+
		"run supervise %s from a shell of your own, and keep its connection in the process that made it", op, why, op), http.StatusForbidden)
	return false
}

// serveOp answers POST /stop and POST /restart, from outside the agent's
// tree only.
func (s *Supervisor) serveOp(op string, agentCgroup func() string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.fromOutside(w, r, op, agentCgroup) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		resp, err := s.ask(ctx, request{kind: op})
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{op: "asked", "stop_timeout": resp.delivery})
	}
}

// serveResume answers POST /resume?session=ID, from a process shown to be
// outside the agent's tree only (peerOrigin).
func (s *Supervisor) serveResume(agentCgroup func() string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.fromOutside(w, r, "resume", agentCgroup) {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		resp, err := s.ask(ctx, request{kind: "resume", session: r.URL.Query().Get("session")})
		switch {
		case errors.Is(err, ErrUnknownSession):
			http.Error(w, err.Error(), http.StatusNotFound)
		case errors.Is(err, resume.ErrNotResumable):
			http.Error(w, err.Error(), http.StatusConflict)
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]string{"session": r.URL.Query().Get("session"), "delivery": resp.delivery})
		}
	}
}

// peerKey keys the peer of a control connection (*child.Peer) in its
// context.
type peerKey struct{}

// peerListener takes the peer of every connection as it is accepted: the
// process that connected, held by a pidfd (child.PeerOf), so that a
// request sent later by a process it forked and left the connection to is
// judged by the process that connected, and a connector that exited is
// gone, not "outside".
type peerListener struct{ net.Listener }

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &peerConn{Conn: c, peer: takePeer(c)}, nil
}

// peerConn is an accepted control connection and its peer, released with
// it.
type peerConn struct {
	net.Conn
	peer *child.Peer
	once sync.Once
}

func (c *peerConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.peer.Close)
	return err
}

// peerOrigin says where a control connection's peer stands relative to the
// agent's tree (see child.Peer.Origin): by the agent's cgroup subtree
// (agentCgroup, "" for none) and by its parents, never by its environment.
// The SUPERVISE_TREE tag of the notify sender check is a hint there; here
// it is not even that, since the answer that matters is "outside", which
// no environment can prove.
func (s *Supervisor) peerOrigin(p *child.Peer, agentCgroup string) (child.Origin, string) {
	if p == nil {
		return child.OriginUnknown, "the connection has no peer"
	}
	root := 0
	if r := s.root.Load(); r != nil && r.ready == nil {
		root = r.pid
	}
	return p.Origin(root, agentCgroup)
}

// Serve answers requests until Close.
func (c *Control) Serve() error {
	if err := c.srv.Serve(c.ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close stops serving and removes the socket file; it is safe to call after
// Serve returned and more than once.
func (c *Control) Close() error {
	err := c.srv.Close()
	os.Remove(c.path)
	return err
}

// ErrNoSupervisor means no supervise answers on the control socket.
var ErrNoSupervisor = errors.New("no supervise is running for this state dir")

// FetchStatus asks the supervise running for stateDir for its status.
func FetchStatus(ctx context.Context, stateDir string, all bool) (Status, error) {
	return FetchStatusView(ctx, stateDir, View{All: all})
}

// FetchStatusView is FetchStatus with a View. The response is decoded as it
// streams in, whatever its size.
func FetchStatusView(ctx context.Context, stateDir string, v View) (Status, error) {
	var st Status
	err := CopyStatus(ctx, stateDir, v, func(r io.Reader) error {
		return json.NewDecoder(r).Decode(&st)
	})
	return st, err
}

// CopyStatus asks the supervise running for stateDir for its status and
// hands the JSON body, as it streams in, to read.
func CopyStatus(ctx context.Context, stateDir string, v View, read func(io.Reader) error) error {
	q := url.Values{}
	if v.All {
		q.Set("all", "1")
	}
	if v.Session != "" {
		q.Set("session", v.Session)
	}
	target := "http://supervise/status"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	resp, tr, err := controlStream(ctx, stateDir, http.MethodGet, target)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode == http.StatusNotFound {
			return fmt.Errorf("%w: %s", ErrUnknownSession, v.Session)
		}
		return fmt.Errorf("%w: %s", ErrRefused, strings.TrimSpace(string(body)))
	}
	return read(&capped{r: resp.Body, n: MaxStatusAnswer})
}

// MaxStatusAnswer bounds the status answer a client reads: a status of
// 100 000 sessions fits; an endless answer from a socket that is not a
// supervise's (a hostile one in the state dir) ends with errTooLarge, its
// reader never holding more than a few times this much.
const MaxStatusAnswer = 32 << 20

// maxControlAnswer bounds the other control answers (a line of JSON).
const maxControlAnswer = 1 << 20

// errTooLarge is an answer past its bound.
var errTooLarge = errors.New("the control socket's answer is larger than any supervise sends: not a supervise's, or a damaged one; not read further")

// capped reads at most n bytes of r, then fails with errTooLarge: unlike
// io.LimitReader, a cut answer is an error, never taken for a whole one.
type capped struct {
	r io.Reader
	n int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

// RequestResume asks the supervise running for stateDir to resume session
// id, and returns how the resume will be delivered.
func RequestResume(ctx context.Context, stateDir, id string) (string, error) {
	body, err := controlDo(ctx, stateDir, http.MethodPost, "http://supervise/resume?session="+url.QueryEscape(id))
	if err != nil {
		return "", err
	}
	var out struct {
		Delivery string `json:"delivery"`
	}
	err = json.Unmarshal(body, &out)
	return out.Delivery, err
}

// RequestStop asks the supervise running for stateDir for the graceful
// stop a SIGTERM gives, and returns its --stop-timeout.
func RequestStop(ctx context.Context, stateDir string) (time.Duration, error) {
	body, err := controlDo(ctx, stateDir, http.MethodPost, "http://supervise/stop")
	if err != nil {
		return 0, err
	}
	var out struct {
		StopTimeout string `json:"stop_timeout"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return 0, err
	}
	return time.ParseDuration(out.StopTimeout)
}

// RequestRestart asks the supervise running for stateDir to stop its run
// and relaunch it at once, what the run interrupts resumed.
func RequestRestart(ctx context.Context, stateDir string) error {
	_, err := controlDo(ctx, stateDir, http.MethodPost, "http://supervise/restart")
	return err
}

// controlStream sends one request over the control socket and returns the
// response, its body unread; the caller closes both.
func controlStream(ctx context.Context, stateDir, method, target string) (*http.Response, *http.Transport, error) {
	path := ControlPath(stateDir)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}, MaxResponseHeaderBytes: 64 << 10}
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		tr.CloseIdleConnections()
		var ne *net.OpError
		if errors.As(err, &ne) && ne.Op == "dial" {
			return nil, nil, fmt.Errorf("%w (%v)", ErrNoSupervisor, err)
		}
		return nil, nil, err
	}
	return resp, tr, nil
}

// ErrRefused wraps a control request the supervisor answered with an error.
var ErrRefused = errors.New("refused")

func controlDo(ctx context.Context, stateDir, method, target string) ([]byte, error) {
	resp, tr, err := controlStream(ctx, stateDir, method, target)
	if err != nil {
		return nil, err
	}
	defer tr.CloseIdleConnections()
	defer resp.Body.Close()
	body, err := io.ReadAll(&capped{r: resp.Body, n: maxControlAnswer})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s", ErrRefused, strings.TrimSpace(string(body)))
	}
	return body, nil
}
