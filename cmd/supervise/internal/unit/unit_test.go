package unit

import "testing"

func TestSystemdWord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		dollar bool
		want   string
	}{
		{"plain/path-1.0_x:y=z,w@v+u", true, "plain/path-1.0_x:y=z,w@v+u"},
		{"", true, `""`},
		{"a b", true, `"a b"`},
		{"100%", true, `"100%%"`},
		{"$HOME", true, `"$$HOME"`},
		{"/opt/$dir/supervise", false, `"/opt/$dir/supervise"`},
		{`say "hi"`, true, `"say \"hi\""`},
		{`a\b`, true, `"a\\b"`},
		{"it's", true, `"it's"`},
		{"l1\nl2\tx\r\x01\x7f", true, `"l1\nl2\tx\r\x01\x7f"`},
		{"\xff", true, `"\xff"`},
		{";", true, `";"`},
		{"é", true, `"é"`},
	} {
		if got := SystemdWord(tc.in, tc.dollar); got != tc.want {
			t.Errorf("SystemdWord(%q, %v) = %s, want %s", tc.in, tc.dollar, got, tc.want)
		}
	}
}
