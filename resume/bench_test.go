package resume

import (
	"fmt"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
)

// benchSessions returns n sessions in the mix a death finds in the open
// index: mostly mid-turn, some waiting, pending, parked and stopped.
func benchSessions(n int) []record.Session {
	states := []record.SessionState{record.InTurn, record.InTurn, record.InTurn, record.Waiting,
		record.ResumePending, record.Parked, record.Stopped, record.InTurn}
	out := make([]record.Session, n)
	for i := range out {
		s := sess(states[i%len(states)], i%3)
		s.ID = fmt.Sprintf("0196b4a4-6f0e-7cc0-a2c5-%012x", n-i) // unsorted: Decide sorts
		if s.State == record.ResumePending {
			s.Resume = &record.Resume{Attempt: 1, Run: 7, Delivered: 1}
		}
		out[i] = s
	}
	return out
}

// BenchmarkDecide is the decision step of a dirty death, which runs between
// the death and the next child's start, over 1, 100 and 10 000 open
// sessions.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			in := benchSessions(n)
			p := DefaultPolicy()
			b.ReportAllocs()
			for b.Loop() {
				if d := Decide(in, kill9, now, p); len(d) != n {
					b.Fatal(len(d))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/session")
		})
	}
}

// BenchmarkDecideRequestedStop is a requested stop over 100 sessions: open
// turns become stopped, uncounted.
func BenchmarkDecideRequestedStop(b *testing.B) {
	in := benchSessions(100)
	stop := Death{Reason: record.ReasonStopped, Requested: true, Run: 7, At: now}
	b.ReportAllocs()
	for b.Loop() {
		Decide(in, stop, now, DefaultPolicy())
	}
}

// BenchmarkMessage is the continuation text of one resumed session.
func BenchmarkMessage(b *testing.B) {
	s := sess(record.InTurn, 0)
	b.ReportAllocs()
	for b.Loop() {
		Message(s, kill9, "")
	}
}

// BenchmarkManual is one `supervise resume` decision.
func BenchmarkManual(b *testing.B) {
	s := sess(record.Parked, 2)
	s.Reason = "mid-turn at 2 consecutive dirty deaths"
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Manual(s, now.Add(time.Minute), ""); err != nil {
			b.Fatal(err)
		}
	}
}
