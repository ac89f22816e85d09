package apiproxy

import "bytes"

// maxLine bounds one SSE line (and so one event's data) the parser keeps.
// A longer line is skipped and its event marked as cut; the bytes still
// pass through to the client unchanged.
const maxLine = 4 << 20

// maxEventName bounds an event's name kept (the APIs' names are short).
const maxEventName = 256

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
	// budget, when set, holds the line's and the data's buffers: what it
	// cannot hold is skipped as a line over maxLine is, and starved set.
	budget pool
	held   int64
	// starved: the budget could not hold a line or an event within
	// maxLine; what the stream says from there may go unread.
	starved bool
}

// release gives the parser's buffers back to the budget.
func (s *sseParser) release() {
	if s.budget != nil {
		s.budget.give(s.held)
	}
	s.held = 0
	s.line, s.data, s.name = nil, nil, nil
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
	// The bound is checked before the append: nothing grows past it.
	var ok bool
	if s.line, ok = grow(s.budget, s.line, len(p), maxLine, &s.held); !ok {
		s.starved = s.starved || len(s.line)+len(p) <= maxLine
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
		if len(value) > maxEventName {
			value = value[:maxEventName]
		}
		s.name = append(s.name[:0], value...)
	case "data":
		if s.cut {
			// Already too large: nothing more of it is kept (not even
			// the newline that would join the next line).
			return
		}
		n := len(value)
		if s.hasData {
			n++
		}
		var ok bool
		if s.data, ok = grow(s.budget, s.data, n, maxLine, &s.held); !ok {
			s.starved = s.starved || len(s.data)+n <= maxLine
			s.cut = true
			s.data = s.data[:0]
			return
		}
		if s.hasData {
			s.data = append(s.data, '\n')
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
