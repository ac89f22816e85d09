package journal

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// faultError is the type of ErrFault.
type faultError struct{}

func (*faultError) Error() string { return "journal faulted: it was damaged or changed while open" }

// Is makes errors.Is(ErrFault, ErrCorrupt) true: a fault is damage, and a
// caller that stops on ErrCorrupt stops on a fault too.
func (*faultError) Is(target error) bool { return target == ErrCorrupt }

// faults is the poison of a DB: set once, by the first fault.
type faults struct {
	once sync.Once
	// err is the first fault, wrapping ErrFault; written before ch is
	// closed, read only after.
	err error
	ch  chan struct{}
}

// Faulted returns a channel that is closed when the journal first faults
// (see ErrFault). From then on every call returns ErrFault at once, and a
// call that was waiting inside bbolt returns it too; but the journal can
// no longer be trusted or written, so its owner must stop: a watcher that
// does not depend on any journal call returning (supervise's kills the
// agent's tree and exits 1) selects on this channel.
func (db *DB) Faulted() <-chan struct{} { return db.faults.ch }

// Fault returns the journal's first fault, wrapping ErrFault, or nil if it
// has not faulted.
func (db *DB) Fault() error {
	select {
	case <-db.faults.ch:
		return db.faults.err
	default:
		return nil
	}
}

// poison records r, a panic recovered from bbolt or a memory fault, as the
// journal's fault (if it is the first) and returns the first fault.
func (db *DB) poison(r any) error {
	db.faults.once.Do(func() {
		if err, ok := r.(error); ok {
			db.faults.err = fmt.Errorf("%s: %w: %w", db.path, ErrFault, err)
		} else {
			db.faults.err = fmt.Errorf("%s: %w: %v", db.path, ErrFault, r)
		}
		close(db.faults.ch)
	})
	return db.faults.err
}

// errAbandoned ends a transaction whose caller stopped waiting for it
// because the journal faulted before it began.
var errAbandoned = errors.New("journal: transaction abandoned after a fault")

// errGoexit tells the caller that the function it passed ended its
// goroutine with runtime.Goexit (t.FailNow in a test).
var errGoexit = errors.New("journal: transaction function called runtime.Goexit")

// call is one transaction run on a goroutine of its own.
type call struct {
	done chan error // buffered: the goroutine never blocks on it

	mu        sync.Mutex
	entered   bool // fn is running or ran
	abandoned bool // the caller left before fn began: fn must not run
	fnDone    chan struct{}
}

// run runs fn in a bbolt transaction and returns its error, or the
// journal's fault: at once if the journal has faulted, and as soon as it
// faults if that happens while this call waits.
//
// A fault can leave one of bbolt's locks held (a page read in Begin, or in
// the rollback bbolt runs while the panic unwinds), and every later
// transaction would wait on it for ever. So the transaction runs on a
// goroutine of its own, and the caller waits for either that goroutine or
// the fault. A goroutine that is blocked in bbolt when the journal faults
// stays blocked; the caller is not. fn itself runs only if the journal had
// not faulted when its transaction began, and a caller whose fn is running
// waits for fn to return (fn takes no bbolt lock), so fn never touches the
// caller's variables after the call returned. With Options.Inline the
// transaction runs on the caller's goroutine instead (runHere).
func (db *DB) run(writable bool, fn func(*bolt.Tx) error) error {
	db.settle() // a logged transaction's commit first (redo.go)
	if err := db.Fault(); err != nil {
		return err
	}
	if db.inline {
		return db.runHere(writable, fn)
	}
	c := &call{done: make(chan error, 1), fnDone: make(chan struct{})}
	go db.exec(c, writable, fn)
	var err error
	select {
	case err = <-c.done:
	case <-db.faults.ch:
		select {
		case err = <-c.done:
		default:
			c.mu.Lock()
			entered := c.entered
			c.abandoned = !entered
			c.mu.Unlock()
			if entered {
				<-c.fnDone
			}
			return db.faults.err
		}
	}
	if err == errGoexit {
		runtime.Goexit()
	}
	return err
}

// runHere runs fn's transaction on the caller's goroutine (Options.Inline),
// with the same recovery as exec: a panic in bbolt or a memory fault
// poisons the journal and is returned. A Goexit in fn ends the caller's
// goroutine, as it would have anyway.
func (db *DB) runHere(writable bool, fn func(*bolt.Tx) error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = db.poison(r)
		}
	}()
	if writable {
		return db.b.Update(fn)
	}
	return db.b.View(fn)
}

// exec is the goroutine of one call. A panic in bbolt (an assertion on a
// damaged page) or a memory fault (a page beyond the end of a file cut
// short: SetPanicOnFault makes the SIGBUS a panic) poisons the journal.
func (db *DB) exec(c *call, writable bool, fn func(*bolt.Tx) error) {
	debug.SetPanicOnFault(true)
	returned := false
	defer func() {
		if r := recover(); r != nil {
			c.done <- db.poison(r)
		} else if !returned {
			c.done <- errGoexit
		}
	}()
	body := func(tx *bolt.Tx) error {
		c.mu.Lock()
		if c.abandoned {
			c.mu.Unlock()
			return errAbandoned
		}
		c.entered = true
		c.mu.Unlock()
		defer close(c.fnDone)
		return fn(tx)
	}
	var err error
	if writable {
		err = db.b.Update(body)
	} else {
		err = db.b.View(body)
	}
	returned = true
	c.done <- err
}
