package main

import "testing"

// TestLifePlan checks the long-life split: every turn runs exactly once,
// in both spans (the first tenth and the rest), and every session belongs
// to exactly one worker, so no two turns of a session overlap.
func TestLifePlan(t *testing.T) {
	for _, c := range []struct{ turns, sessions, workers, want int }{
		{400_000, 10_000, 200, 200},
		{400_000, 10_000, 64, 50},
		{2_000, 100, 7, 5},
		{1_003, 97, 10, 1},
		{50, 100, 200, 100},
	} {
		w := lifePlan(c.sessions, c.workers)
		if w != c.want {
			t.Errorf("lifePlan(%d, %d) = %d, want %d", c.sessions, c.workers, w, c.want)
		}
		seen := make([]int, c.turns)
		owner := map[int]int{}
		tenth := c.turns / 10
		for _, span := range [][2]int{{0, tenth}, {tenth, c.turns}} {
			for wk := range w {
				for i := lifeFirst(wk, w, span[0]); i < span[1]; i += w {
					if i < span[0] {
						t.Fatalf("worker %d starts at %d before %d", wk, i, span[0])
					}
					seen[i]++
					s := i % c.sessions
					if o, ok := owner[s]; ok && o != wk {
						t.Fatalf("%+v: session %d run by workers %d and %d", c, s, o, wk)
					}
					owner[s] = wk
				}
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("%+v: turn %d run %d times", c, i, n)
			}
		}
	}
}
