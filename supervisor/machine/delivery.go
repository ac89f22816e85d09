package machine

import (
	"sort"

	"github.com/supervise-dev/supervise/record"
)

// Delivery is the part that records which run each resume is handed to:
// the resume file or the --resume-exec argv, folded into a death's commit
// when the relaunch follows at once.
type Delivery struct {
	// folded holds the sessions whose delivery to the run about to start
	// was recorded in the death's commit (fold), with the run each had
	// been handed before; nil when none.
	folded map[string]uint64
}

// fold records, in the death's commit, the delivery of the resumes the
// launch that follows at once will hand to run: that launch then forks
// without a commit of its own (one commit, two fdatasyncs, fewer on a
// restart that resumes). The power-loss enumerator (journal's
// TestPowerLossCrashImages) proves it adds no crash state: a cut leaves
// the journal before the death, or the death with its delivery; the
// delivery recorded for a run that never started is what a cut between a
// separate delivery commit and the fork leaves too. A launch that hands
// over something else, or nothing (the resume file cannot be written),
// corrects it in delivered.
func (d *Delivery) fold(o *out, pending []*record.Session, run uint64) {
	if len(pending) == 0 {
		return
	}
	d.folded = make(map[string]uint64, len(pending))
	ids := make([]string, 0, len(pending))
	for _, sess := range pending {
		d.folded[sess.ID] = sess.Resume.Run
		r := *sess.Resume
		r.Delivered++
		r.Run = run
		sess.Resume = &r
		ids = append(ids, sess.ID)
	}
	o.save(ids...)
}

// unfold takes back the deliveries the death's commit recorded for run
// (fold) when the launch hands over none of them: a stop came first, the
// hold changed, or the resume file could not be written.
func (d *Delivery) unfold(o *out, sessions map[string]*record.Session, run uint64) {
	folded := d.folded
	d.folded = nil
	if ids := takeBack(sessions, folded, run); len(ids) > 0 {
		o.save(ids...)
		o.add(Commit{Kind: CommitPending, Why: "taking back deliveries that were not made"})
	}
}

// takeBack restores the resumes of folded that are recorded as handed to
// run, and returns their ids.
func takeBack(sessions map[string]*record.Session, folded map[string]uint64, run uint64) []string {
	var ids []string
	for id, prev := range folded {
		if sess := sessions[id]; sess != nil && sess.Resume != nil && sess.Resume.Run == run {
			r := *sess.Resume
			r.Delivered--
			r.Run = prev
			sess.Resume = &r
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// delivered records that run e.Run got the resumes of e.IDs; the commit
// follows before the fork (or, live, before the signal), unless the
// death's commit recorded every one of them already (fold).
func (d *Delivery) delivered(o *out, e Delivered, sessions map[string]*record.Session, task *TaskState) {
	if e.Unsent {
		d.unfold(o, sessions, e.Run)
		return
	}
	folded := d.folded
	d.folded = nil
	var changed []string
	for _, id := range e.IDs {
		sess := sessions[id]
		if sess == nil || sess.Resume == nil {
			continue
		}
		task.touch(id)
		if _, ok := folded[id]; ok {
			// Handed to this run: never taken back below, even when its
			// resume changed since the fold (a manual resume meanwhile).
			delete(folded, id)
			if sess.Resume.Run == e.Run {
				continue // recorded by the death's commit
			}
		}
		r := *sess.Resume
		r.Delivered++
		r.Run = e.Run
		sess.Resume = &r
		changed = append(changed, id)
	}
	changed = append(changed, takeBack(sessions, folded, e.Run)...) // recorded for this run, not handed to it
	o.add(Count{Metric: "resume", N: len(e.IDs)})
	if len(changed) > 0 {
		o.save(changed...)
		o.add(Commit{Kind: CommitPending, Why: "recording the deliveries"})
	}
	if e.Live {
		return
	}
	o.info("delivering resumes", "run", e.Run, "via", e.Via, "sessions", e.IDs)
}
