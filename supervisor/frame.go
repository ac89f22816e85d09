package supervisor

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"sync/atomic"
	"time"
)

// Whose words are whose (issue 46 B8): the agent's stderr, passed through
// into the stream that also carries supervise's log, could print a line
// that reads as one of supervise's records (level=INFO msg="session resumed
// by hand", a JSON record, raw escape sequences). When supervise copies
// that stream (task mode, or --log-keep above 0), each of the agent's
// lines is framed so it cannot be taken for supervise's:
//
//   - text: "agent[RUN] " before the line, its control characters (ESC
//     among them) written as \xNN; supervise's own records never begin so;
//   - json: a record of its own, {"time","level":"INFO","msg":"agent
//     output","stream":"stderr","run":N,"line":"..."}: whatever the line
//     holds, it is a JSON string inside it.
//
// The agent's stdout is never framed (it is the agent's data, not a log),
// and neither is a stream that goes to a terminal (the agent draws there).

// Frame formats (Config.FrameStderr).
const (
	FrameNone = ""
	FrameText = "text"
	FrameJSON = "json"
)

// framer writes the agent's lines framed, keeping what came after the last
// line feed until the next chunk.
type framer struct {
	format  string
	run     *atomic.Uint64
	now     func() time.Time
	partial []byte
}

// maxFramedLine bounds a line held for its line feed: a longer one is
// framed in pieces.
const maxFramedLine = 64 << 10

func (f *framer) write(dst io.Writer, b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			f.partial = append(f.partial, b...)
			for len(f.partial) >= maxFramedLine {
				f.line(dst, f.partial[:maxFramedLine])
				f.partial = append(f.partial[:0], f.partial[maxFramedLine:]...)
			}
			return
		}
		line := b[:i]
		if len(f.partial) > 0 {
			line = append(f.partial, line...)
			f.partial = f.partial[:0]
		}
		f.line(dst, line)
		b = b[i+1:]
	}
}

// flush writes what is left without a line feed (the stream's end).
func (f *framer) flush(dst io.Writer) {
	if len(f.partial) > 0 {
		f.line(dst, f.partial)
		f.partial = nil
	}
}

func (f *framer) line(dst io.Writer, line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	run := f.run.Load()
	if f.format == FrameJSON {
		b, _ := json.Marshal(struct {
			Time   string `json:"time"`
			Level  string `json:"level"`
			Msg    string `json:"msg"`
			Stream string `json:"stream"`
			Run    uint64 `json:"run"`
			Line   string `json:"line"`
		}{f.now().UTC().Format(time.RFC3339Nano), "INFO", "agent output", "stderr", run, string(line)})
		dst.Write(append(b, '\n'))
		return
	}
	out := make([]byte, 0, len(line)+16)
	out = append(out, "agent["...)
	out = strconv.AppendUint(out, run, 10)
	out = append(out, "] "...)
	for _, c := range line {
		if c < 0x20 && c != '\t' || c == 0x7f {
			out = append(out, '\\', 'x', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
			continue
		}
		out = append(out, c)
	}
	dst.Write(append(out, '\n'))
}

// framer is a framer for the agent's stderr as the configuration asks,
// nil for none.
func (s *Supervisor) framer() *framer {
	if s.cfg.FrameStderr == FrameNone {
		return nil
	}
	return &framer{format: s.cfg.FrameStderr, run: &s.run.frameRun, now: s.clock.Now}
}
