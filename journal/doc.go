// Package journal is supervise's durable memory: a bbolt file in the state
// directory that outlives both the agent and the supervisor. It is the only
// package that imports bbolt, and it never hands out a *bolt.Tx.
//
// Layout (update this drawing, the schema constant and a migration whenever
// the structure changes):
//
//	journal.db
//	└── v1                                   root bucket, schema generation 1
//	    ├── meta
//	    │   ├── schema    : u64 big-endian     additive schema version inside v1 (currently 2)
//	    │   ├── schema.crc: 4 bytes            check of schema: CRC-32C (Castagnoli), big-endian,
//	    │   │                                  of "supervise journal schema " + schema's 8 bytes;
//	    │   │                                  absent in journals written before it existed
//	    │   ├── clean     : 1 byte             1 = the last supervisor shut down cleanly
//	    │   ├── owner     : JSON Owner         the supervisor holding, or last holding, the journal
//	    │   ├── child     : JSON Child         the child believed running; absent when none runs
//	    │   ├── restarts  : u64 big-endian     relaunches after a death, over the journal's life
//	    │   ├── redo      : u64 big-endian     the last redo record this file holds (redo.go)
//	    │   ├── redo.id   : 16 bytes           random, names the journal in its redo records
//	    │   └── state.<k> : JSON               small policy documents (crash-loop guard, backoff)
//	    ├── runs
//	    │   └── <run: u64 big-endian> : JSON Run     one per child run; keys sort by run number
//	    ├── sessions
//	    │   └── <session id bytes> : JSON Session    one per agent session
//	    │       (since schema 2 each run and session record ends with its own check,
//	    │       ,"crc32c":"<8 hex digits>"}: see check.go)
//	    └── open
//	        └── <session id bytes> : empty           index of sessions whose state matters after
//	                                                 a death (see Session.Open); boot reads only
//	                                                 these, never the settled ones
//
// Durability: every Update is one bbolt transaction committed with fsync
// (NoSync is never set). Once Update returns nil the change survives kill -9
// of the supervisor and power loss. UpdateLogged (a death's commit) returns
// sooner, once its changes are synced as one record in the redo slot
// journal.db.redo; bbolt's commit follows on a goroutine, and the next Open
// replays the record if journal.db lacks it (redo.go).
//
// Single instance: Open takes bbolt's exclusive file lock with a short
// timeout. A second writer gets a *LockedError (errors.Is ErrLocked) naming
// the holder's pid, read from the sidecar file journal.db.owner that the
// holder writes after taking the lock.
//
// Schema: Open reads a journal whose schema is at most Schema (with a
// schema.crc that passes, or none). It refuses one a newer release wrote
// with ErrSchema and leaves it untouched: its schema is above Schema by at
// most 16 and its schema.crc passes (a release that raises the schema
// must write schema.crc with it). Anything else, a check that fails, a
// schema of 0, beyond Schema+16, or newer without a check, is no version
// any release wrote: it is damage, ErrCorrupt (a bit flip once made
// schema 1 read as 4503599627370497, and supervise refused to start for
// ever instead of moving the file aside).
//
// Corruption: a file that is not a bbolt file, fails bbolt's checksums,
// belongs to another program, has a meta record that fails its own check,
// or fails Verify yields ErrCorrupt or ErrNotJournal. A session or run
// record that fails its check does not: it is quarantined (a session reads
// as parked by ParkedByDamaged, a run is skipped), so that one bad record
// never stops supervise or status (check.go).
//
// Identity: after every commit the file at the journal's name must still
// be the open one; a journal replaced under supervise faults (identity.go),
// after keeping the open file as journal.db.kept-<time>, from which the
// next start (OpenState) recovers (keep.go). Open never modifies
// such a file; Quarantine renames it aside so that a fresh journal can
// start without destroying evidence.
//
// Faults: the file can change under an open journal (the agent, at the
// same uid, truncated it while supervise ran), and a read of a page past
// its new end faults. The journal reads with SetPanicOnFault and turns the
// fault, like any panic of bbolt on a damaged page, into ErrFault (which
// matches ErrCorrupt). A fault can leave one of bbolt's locks held for
// good, so the first one poisons the DB:
//
//   - the call that faulted returns ErrFault, and Faulted's channel closes;
//   - every later call (View, Update, Verify, CheckRecords, PruneSessions)
//     returns ErrFault at once, from any goroutine, without touching bbolt;
//   - a call already waiting inside bbolt returns ErrFault too (its
//     function, if it was running, first returns); its transaction's
//     goroutine may stay blocked on the lock until the process exits;
//   - Close returns at once and releases nothing (see DB.Close).
//
// Nothing recovers a poisoned DB: its owner must stop. supervise's runner
// watches Faulted apart from its loop, kills the agent's tree and exits 1;
// at the next start, the full check finds the damage and moves the file
// aside.
//
// The caller must Close the DB. Records returned by a Tx are copies and stay
// valid after the transaction.
package journal
