//go:build !supervise_portable

package integration

const portableBackend = false
