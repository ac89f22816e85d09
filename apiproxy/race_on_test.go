//go:build race

package apiproxy_test

// raceEnabled: the race detector multiplies memory, so RSS ceilings are
// not measured under it.
const raceEnabled = true
