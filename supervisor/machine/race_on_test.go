//go:build race

package machine

// raceEnabled: the race detector slows Step tenfold; the simulation runs
// fewer steps under it (its full length runs in the plain pass).
const raceEnabled = true
