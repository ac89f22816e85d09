//go:build !linux || supervise_portable

package child

import "syscall"

// Cgroups is the cgroup v2 subtree of a supervised agent; this backend has
// none (OpenCgroups always says why).
type Cgroups struct{}

// OpenCgroups returns nil: cgroups are a Linux facility, and the portable
// backend does without them.
func OpenCgroups(name, id string) (*Cgroups, string) {
	return nil, "cgroups are not used by this build (portable backend)"
}

// Dir returns "".
func (c *Cgroups) Dir() string { return "" }

// Memory reports false.
func (c *Cgroups) Memory() bool { return false }

// Close does nothing.
func (c *Cgroups) Close() {}

// Run is never called on this backend.
func (c *Cgroups) Run(n uint64) (*RunCgroup, error) { return nil, nil }

// RunCgroup is the cgroup of one launch; none on this backend.
type RunCgroup struct{}

// Dir returns "".
func (r *RunCgroup) Dir() string { return "" }

func (r *RunCgroup) apply(sys *syscall.SysProcAttr) {}

// Kill does nothing.
func (r *RunCgroup) Kill() error { return nil }

// OOMKills reports that OOM kills cannot be counted.
func (r *RunCgroup) OOMKills() (uint64, bool) { return 0, false }

// Close does nothing.
func (r *RunCgroup) Close() {}
