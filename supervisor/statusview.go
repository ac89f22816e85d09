package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sort"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
)

// Status at any size. The journal may hold 100 000 sessions (or more, with
// --keep-sessions 0): status never builds them into one response by
// default. It shows the open sessions (they need attention, and are never
// pruned), the latest settled ones, and counts per state; View.All streams
// every session, View.Session shows one. The journal is scanned off the
// loop goroutine: the loop only hands over its header and a copy of the
// sessions it holds in memory (newer than the journal while uncommitted).

// statusSettled is how many settled sessions the default status lists: the
// most recently updated.
const statusSettled = 20

// View selects the sessions status lists.
type View struct {
	// All lists every session, streamed.
	All bool
	// Session, if set, lists only that session.
	Session string
}

// statusSnap is a status without its sessions, plus what the loop holds.
type statusSnap struct {
	st   Status
	mem  map[string]record.Session
	held string
	// deadlines are the turn deadlines the loop runs, by session.
	deadlines map[string]*DeadlineStatus
}

// render is a session as status shows it, with the deadline the loop runs
// for it.
func (sn statusSnap) render(s record.Session) SessionStatus {
	ss := sessionStatus(s, sn.st.StateDir, sn.held)
	ss.Deadline = sn.deadlines[s.ID]
	return ss
}

// readSnapshot is the header of a supervise that is not running, from its
// journal.
func readSnapshot(db *journal.DB, name, stateDir string) (statusSnap, error) {
	st, err := readHeader(db, name, stateDir)
	held := ""
	if st.Guard.Open {
		held = "crash-loop guard open"
	}
	return statusSnap{st: st, held: held}, err
}

// scan calls fn for every session, the journal's merged with the loop's
// newer copies, in id order. full decodes the whole session; only what fn
// needs is decoded.
func (sn statusSnap) scan(tx *journal.Tx, fn func(b journal.SessionBrief, full func() (record.Session, error)) error) error {
	ids := make([]string, 0, len(sn.mem))
	for id := range sn.mem {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	i := 0
	mem := func(id string) error {
		m := sn.mem[id]
		return fn(journal.SessionBrief{ID: m.ID, State: m.State, Updated: m.Updated},
			func() (record.Session, error) { return m, nil })
	}
	err := tx.ForEachSessionBrief(func(b journal.SessionBrief, full func() (record.Session, error)) error {
		for ; i < len(ids) && ids[i] < b.ID; i++ { // in memory only
			if err := mem(ids[i]); err != nil {
				return err
			}
		}
		if i < len(ids) && ids[i] == b.ID {
			i++
			if !b.Updated.After(sn.mem[b.ID].Updated) {
				return mem(b.ID)
			}
		}
		return fn(b, full)
	})
	if err != nil {
		return err
	}
	for ; i < len(ids); i++ { // the rest: in memory only
		if err := mem(ids[i]); err != nil {
			return err
		}
	}
	return nil
}

// collect fills sn.st.Sessions per view (not All) and the counts.
func (sn *statusSnap) collect(db *journal.DB, v View) error {
	st := &sn.st
	st.Sessions = []SessionStatus{}
	st.SessionCounts = map[string]int{}
	if v.Session != "" {
		s, ok := sn.mem[v.Session]
		err := db.View(func(tx *journal.Tx) error {
			js, jok, err := tx.Session(v.Session)
			if jok && (!ok || js.Updated.After(s.Updated)) {
				s, ok = js, true
			}
			return err
		})
		if err != nil {
			return err
		}
		if !ok {
			return ErrUnknownSession
		}
		st.Sessions = append(st.Sessions, sn.render(s))
		st.SessionCounts[string(s.State)] = 1
		st.SessionsTotal = 1
		return nil
	}
	var latest []journal.SessionBrief // settled, newest first, at most statusSettled
	err := db.View(func(tx *journal.Tx) error {
		err := sn.scan(tx, func(b journal.SessionBrief, full func() (record.Session, error)) error {
			st.SessionCounts[string(b.State)]++
			st.SessionsTotal++
			if b.State.Open() {
				s, err := full()
				if err != nil {
					return err
				}
				st.Sessions = append(st.Sessions, sn.render(s))
				return nil
			}
			// Most of a large journal: counted, not decoded.
			if len(latest) == statusSettled && !b.Updated.After(latest[len(latest)-1].Updated) {
				return nil
			}
			at := sort.Search(len(latest), func(i int) bool { return b.Updated.After(latest[i].Updated) })
			latest = append(latest, journal.SessionBrief{})
			copy(latest[at+1:], latest[at:])
			latest[at] = b
			if len(latest) > statusSettled {
				latest = latest[:statusSettled]
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, b := range latest {
			s, ok := sn.mem[b.ID]
			if !ok || b.Updated.After(s.Updated) {
				var err error
				if s, ok, err = tx.Session(b.ID); err != nil {
					return err
				}
			}
			if ok {
				st.Sessions = append(st.Sessions, sn.render(s))
			}
		}
		return nil
	})
	sortSessions(st.Sessions)
	st.SessionsOmitted = st.SessionsTotal - len(st.Sessions)
	return err
}

// every renders every session of the journal in turn, counting each by
// its state (status --all: streamed, never all held at once).
func (sn *statusSnap) every(db *journal.DB, fn func(SessionStatus) error) error {
	st := &sn.st
	return db.View(func(tx *journal.Tx) error {
		return sn.scan(tx, func(_ journal.SessionBrief, full func() (record.Session, error)) error {
			s, err := full()
			if err != nil {
				return err
			}
			st.SessionCounts[string(s.State)]++
			st.SessionsTotal++
			return fn(sn.render(s))
		})
	})
}

// writeJSON writes the status as indented JSON: with v.All, every session
// streamed straight from the journal, never held in memory all at once.
func (sn *statusSnap) writeJSON(w io.Writer, db *journal.DB, v View) error {
	if !v.All {
		if err := sn.collect(db, v); err != nil {
			return err
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(sn.st)
	}
	st := &sn.st
	st.Sessions = []SessionStatus{}
	st.SessionCounts = map[string]int{}
	head, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	const key = "\n  \"sessions\": []"
	cut := bytes.Index(head, []byte(key))
	if cut < 0 {
		return errors.New("status: no sessions field")
	}
	if _, err := w.Write(append(head[:cut:cut], "\n  \"sessions\": ["...)); err != nil {
		return err
	}
	first := true
	err = sn.every(db, func(s SessionStatus) error {
		b, err := json.MarshalIndent(s, "    ", "  ")
		if err != nil {
			return err
		}
		sep := ",\n    "
		if first {
			sep, first = "\n    ", false
		}
		_, err = io.WriteString(w, sep+string(b))
		return err
	})
	if err != nil {
		return err // the output is cut short: invalid JSON, never a silent truncation
	}
	tail, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	rest := tail[bytes.Index(tail, []byte(key))+len(key):]
	closing := "]"
	if !first {
		closing = "\n  ]"
	}
	if _, err := io.WriteString(w, closing); err != nil {
		return err
	}
	_, err = w.Write(append(rest, '\n'))
	return err
}
