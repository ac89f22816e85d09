package runflags

import (
	"fmt"
	"os"

	"github.com/supervise-dev/supervise/profile"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// profile plans the run of argv by its CLI's profile (package profile):
// with --profiles auto and a CLI supervise knows, its hooks or the proxy,
// and the resume template when none was given. The plan's Env is the
// agent's whole base environment (supervise's own plus the profile's), nil
// when the profile adds nothing.
func (f *Flags) profile(set map[string]bool, argv []string, dir string) (profile.Plan, error) {
	none := profile.Plan{Argv: argv}
	switch f.profiles {
	case "off":
		return none, nil
	case "auto":
	default:
		return none, fmt.Errorf("%s must be auto or off, not %q", Source("profiles", set), f.profiles)
	}
	self, err := os.Executable()
	if err != nil {
		return none, fmt.Errorf("--profiles auto: supervise cannot name its own executable for the hooks (%v): give --profiles off", err)
	}
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	plan, ok, err := profile.Make(argv, profile.Options{
		Interactive: machine.InteractiveArgv(argv),
		Template:    f.resumeExec != "",
		ProxyOff:    set["api-proxy"] && f.apiProxy == "off" || envSet("api-proxy") && f.apiProxy == "off",
		ProxyOn:     f.apiProxy == "on",
		StateDir:    dir,
		Self:        self,
		Home:        home,
		Cwd:         cwd,
		Getenv:      os.Getenv,
	})
	if err != nil || !ok {
		return none, err
	}
	if plan.APIProxy {
		f.apiProxy = "on"
	}
	if plan.Env != nil {
		plan.Env = append(os.Environ(), plan.Env...)
	}
	return plan, nil
}

// envSet reports whether a flag's SUPERVISE_ variable is in the environment.
func envSet(name string) bool {
	_, ok := os.LookupEnv(EnvName(name))
	return ok
}
