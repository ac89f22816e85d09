package supervisor

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supervise-dev/supervise/internal/statedir"
	"golang.org/x/sys/unix"
)

// The agent's stdout and stderr, still passed through as they always
// were, are also kept in the state dir (supervise logs): each line with
// its time, run and stream, in AgentLogFile, rotated to AgentLogFile+".1"
// when it reaches half of --log-keep, so the two never hold more than it.
// A stream that goes to a terminal is not kept (an interactive agent draws
// its screen there). Outside task mode the agent writes each kept stream
// into one pipe that lives as long as supervise (made once, off the
// restart path: no pipe nor goroutine per launch), and each line is taken
// for the run current when it is read; task mode reads both streams
// through pipes of each run in any case (its tails), which feed the log.

// AgentLogFile is the state dir's file of the agent's output lines.
const AgentLogFile = "agent.log"

// DefaultLogKeep is --log-keep's default: the agent's output kept in all.
const DefaultLogKeep = 16 << 20

// maxLogLine bounds one kept line; a longer one is cut into several.
const maxLogLine = 64 << 10

// agentLog appends the agent's output lines to AgentLogFile; safe for the
// two streams' copiers at once. A write that fails is dropped: the agent's
// output still reaches where it always went.
type agentLog struct {
	// run is the current run: the lines read are taken for it.
	run atomic.Uint64
	// pipes are the write ends the agent's stdout and stderr go to when
	// they are kept (nil: that stream is not), made once by open.
	pipes [2]*os.File
	mu    sync.Mutex
	dir   string
	half  int64 // the size at which the file is rotated
	f     *os.File
	size  int64
	err   error // the last write error, said once
}

func newAgentLog(dir string, keep int64) *agentLog {
	if keep <= 0 {
		return nil
	}
	return &agentLog{dir: dir, half: max(keep/2, 4096)}
}

// writeLine appends one line of run's stream.
func (l *agentLog) writeLine(run uint64, stream string, line []byte) {
	var b bytes.Buffer
	b.Grow(len(line) + 48)
	b.WriteString(time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))
	b.WriteString(" run=" + strconv.FormatUint(run, 10) + " " + stream + ": ")
	b.Write(line)
	b.WriteByte('\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.append(b.Bytes()); err != nil && l.err == nil {
		l.err = err
	}
}

func (l *agentLog) append(b []byte) error {
	path := filepath.Join(l.dir, AgentLogFile)
	if l.f != nil && l.size+int64(len(b)) > l.half {
		l.f.Close()
		l.f = nil
		if err := os.Rename(path, path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if l.f == nil {
		f, size, err := statedir.OpenAppend(path)
		if err != nil {
			return err
		}
		l.f, l.size = f, size
	}
	n, err := l.f.Write(b)
	l.size += int64(n)
	return err
}

// Indexes of agentLog.pipes.
const (
	logStdout = iota
	logStderr
)

var streamNames = [2]string{"stdout", "stderr"}

// open makes the pipe of each stream whose destination (outDst, errDst)
// is not a terminal, and the copier that passes it through and keeps its
// lines.
func (l *agentLog) open(outDst, errDst *os.File, frame *framer) {
	if l == nil {
		return
	}
	for i, dst := range [2]*os.File{outDst, errDst} {
		if isTerminal(dst) {
			continue
		}
		f := frame
		if i == logStdout {
			f = nil // the agent's data, never framed
		}
		if w, _, err := startTail(dst, &lines{log: l, stream: streamNames[i]}, f); err == nil {
			l.pipes[i] = w
		}
	}
}

// close closes the pipes' write ends (a copier ends when the agent's
// copies are closed too) and the file.
func (l *agentLog) close() {
	if l == nil {
		return
	}
	for i, w := range l.pipes {
		if w != nil {
			w.Close()
			l.pipes[i] = nil
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// lines splits a stream's output into lines for an agentLog: partial keeps
// what came after the last line feed.
type lines struct {
	log     *agentLog
	stream  string
	partial []byte
}

// add takes a chunk of output.
func (s *lines) add(b []byte) {
	if s == nil || s.log == nil {
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.partial = append(s.partial, b...)
			if len(s.partial) >= maxLogLine {
				s.log.writeLine(s.log.run.Load(), s.stream, s.partial[:maxLogLine])
				s.partial = append(s.partial[:0], s.partial[maxLogLine:]...)
			}
			return
		}
		line := b[:i]
		if len(s.partial) > 0 {
			line = append(s.partial, line...)
			s.partial = s.partial[:0]
		}
		for len(line) > maxLogLine {
			s.log.writeLine(s.log.run.Load(), s.stream, line[:maxLogLine])
			line = line[maxLogLine:]
		}
		s.log.writeLine(s.log.run.Load(), s.stream, line)
		b = b[i+1:]
	}
}

// end writes what is left without a line feed, at the stream's end.
func (s *lines) end() {
	if s != nil && s.log != nil && len(s.partial) > 0 {
		s.log.writeLine(s.log.run.Load(), s.stream, s.partial)
		s.partial = nil
	}
}

// orStd is f, or std when f is nil.
func orStd(f, std *os.File) *os.File {
	if f == nil {
		return std
	}
	return f
}

// isTerminal reports whether f is a terminal (the agent may draw on it).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil
}

// logged returns the lines task mode's pipe of stream (a run's tail,
// going to dst) feeds the agent log with: nil when it is not kept.
func (s *Supervisor) logged(stream string, dst *os.File) *lines {
	if s.run.agentLog == nil || isTerminal(dst) {
		return nil
	}
	return &lines{log: s.run.agentLog, stream: stream}
}

// setRun makes run the current run: the lines read from now on are its.
func (l *agentLog) setRun(run uint64) {
	if l != nil {
		l.run.Store(run)
	}
}
