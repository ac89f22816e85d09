//go:build !race

package apiproxy_test

const raceEnabled = false
