// Package child starts, signals and waits for one agent process and its
// process tree. It knows nothing of backoff or storage: it runs a tree and
// reports how it ended.
//
// Invariants:
//
//   - A Reaper owns every wait on the supervisor's children. It makes the
//     process a child subreaper, so descendants orphaned by the agent are
//     re-parented to it and can be found and killed. Nothing else in the
//     process may call wait4, exec.Cmd.Wait or os.Process.Wait: a second
//     reaper steals exit statuses.
//   - A child is forked while the reaper's lock is held and registered
//     before the lock is released, so an exit that happens at once is never
//     reaped unclaimed.
//   - When a leader exits, its process group is killed while the unreaped
//     zombie still pins the group id (no pid reuse can redirect the kill),
//     then every remaining unregistered child of the supervisor (re-parented
//     descendants, including ones that called setsid) is killed until none
//     is left. Done is closed after that sweep.
//   - Children are forked from one OS thread locked for the Reaper's
//     lifetime, with Pdeathsig SIGKILL: if the supervisor is killed, the
//     agent dies with it instead of running unsupervised. Descendants are
//     found by the next supervisor through the tag in their environment
//     (KillTagged) and the recorded pid plus start time (KillRecorded).
//   - A Spec.Credential (the user and groups of --user) is set between fork
//     and exec, supplementary groups included, and before the parent-death
//     signal, which the kernel clears on any later change of credentials.
//   - Identity is pid plus process start time (in ms since the epoch, the
//     value of gopsutil's CreateTime; read from /proc directly on Linux,
//     through gopsutil elsewhere); a bare pid is never signalled unless it is an
//     unreaped child of this process.
//
// The invariants above are the Linux backend's (linux && !supervise_portable).
// The portable backend (macOS, and Linux built with -tags supervise_portable)
// keeps the single reaper, the group kill while the zombie pins the group id
// (found by the process table's state, as there is no waitid(WNOWAIT)) and
// pid plus start time, but has no subreaper, no parent-death signal and no
// pidfds: descendants that left the group are found after the leader exits
// by Spec.Tag in their environment, an agent whose supervisor was killed runs
// on until the next supervisor kills it, and a start time checked just
// before kill(2) stands in for a pidfd.
//
// Close must be called on a Reaper after its last Process is done.
package child
