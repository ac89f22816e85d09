//go:build supervise_portable

package integration

// portableBackend builds the supervise binary under test with the portable
// backend too (-tags supervise_portable), when the tests run with it: the
// suite then runs through the code macOS uses.
const portableBackend = true
