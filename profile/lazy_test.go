package profile

import (
	"regexp"
	"testing"
)

// Every pattern compiles: they are compiled at first use now, so a bad
// one would panic there, not at init.
func TestPatternsCompile(t *testing.T) {
	for _, re := range []func() *regexp.Regexp{dumpRe, inProgressRe, retryInRe, resetsInRe, retryAftRe, tryInRe, durPartRe,
		unixRe, tryAtRe, resetsClkRe, stampRe, tagRe, wordRe, targetRe, fieldRe, codexRetryRe, geminiRetryRe, rfc3339Re} {
		if re() == nil {
			t.Fatal("a pattern compiled to nil")
		}
	}
}
