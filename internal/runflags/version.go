package runflags

import "runtime/debug"

// Version is supervise's version as the build recorded it (`supervise
// --version`): the main module's version (vX.Y.Z from `go install
// ...@vX.Y.Z`, or the pseudo-version Go stamps from the VCS when built in a
// checkout), else "devel" followed by the VCS revision, marked +dirty for
// uncommitted changes, when the build recorded one.
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return version(info)
}

func version(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+dirty"
	}
	return "devel " + rev
}
