//go:build race

package integration

// raceEnabled builds the supervise binary under test with -race too, when
// the tests themselves run with -race.
const raceEnabled = true
