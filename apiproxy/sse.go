package apiproxy

import "bytes"

// maxLine bounds one SSE line (and so one event's data) the parser keeps.
// A longer line is skipped and its event marked as cut; the bytes still
// pass through to the client unchanged.
const maxLine = 4 << 20

// sseKind says what an SSE block was.
type sseKind int

const (
	sseData    sseKind = iota // an event (name and/or data)
	sseComment                // only comment lines (": keep-alive")
	sseCut                    // an event too large to keep: data not given
)

// sseParser splits a Server-Sent Events stream, fed in arbitrary pieces,
// into events. It keeps at most one partial line and one event's data.
type sseParser struct {
	line     []byte
	skipping bool // the current line is over maxLine: drop it up to its end
	name     []byte
	data     []byte
	hasData  bool
	cut      bool
	comment  bool // the current event has seen a comment line
	// event is called for each complete event with its name (may be
	// empty) and data (lines joined with "\n"), and how it was kept.
	event func(name, data []byte, kind sseKind)
}

// feed parses p. It never fails: malformed input yields fewer events.
func (s *sseParser) feed(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.add(p)
			return
		}
		s.add(p[:i])
		p = p[i+1:]
		if s.skipping {
			s.skipping = false
			s.cut = true
			s.line = s.line[:0]
			continue
		}
		s.endLine(bytes.TrimSuffix(s.line, []byte("\r")))
		s.line = s.line[:0]
	}
}

func (s *sseParser) add(p []byte) {
	if s.skipping {
		return
	}
	if len(s.line)+len(p) > maxLine {
		s.skipping = true
		s.line = s.line[:0]
		return
	}
	s.line = append(s.line, p...)
}

func (s *sseParser) endLine(l []byte) {
	if len(l) == 0 {
		s.dispatch()
		return
	}
	if l[0] == ':' {
		s.comment = true
		return
	}
	field, value, _ := bytes.Cut(l, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "event":
		s.name = append(s.name[:0], value...)
	case "data":
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > maxLine {
			s.cut = true
			return
		}
		s.data = append(s.data, value...)
		s.hasData = true
	}
}

// end dispatches an event left open by a stream that ended without the
// blank line that closes it.
func (s *sseParser) end() {
	if len(s.line) > 0 && !s.skipping {
		s.endLine(bytes.TrimSuffix(s.line, []byte("\r")))
		s.line = s.line[:0]
	}
	s.dispatch()
}

func (s *sseParser) dispatch() {
	switch {
	case s.cut:
		s.event(s.name, nil, sseCut)
	case s.hasData || len(s.name) > 0:
		s.event(s.name, s.data, sseData)
	case s.comment:
		s.event(nil, nil, sseComment)
	}
	s.name, s.data = s.name[:0], s.data[:0]
	s.hasData, s.cut, s.comment = false, false, false
}
