package journal

import "github.com/supervise-dev/supervise/record"

// ForEachSession calls fn for every session, in id order, until fn returns
// an error.
func (t *Tx) ForEachSession(fn func(record.Session) error) error {
	return t.sessions().ForEach(func(k, v []byte) error { return fn(t.decodeSession(k, v)) })
}
